// Rules from a control plane: real `sluice serve` processes subscribed over ADS (state of the world) to a
// real grpc-js xDS server (test/helpers/xds-server.ts). First config, pushed updates, invalid pushes (NACK),
// a restarted control plane, TLS to it, and Envoy Gateway's Deployment environment.
import * as grpc from "@grpc/grpc-js";
import fs from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { certFactory, type Pem } from "../helpers/certs.js";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { roomInWindow } from "../helpers/minute.js";
import { freePort } from "../helpers/ports.js";
import { sampleValue, scrape } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { startXdsServer, UNIT, type RateLimitConfigMsg, type XdsServer } from "../helpers/xds-server.js";

const sluices: SluiceProcess[] = [];
const servers: XdsServer[] = [];
const clients: RlsClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of sluices.splice(0)) await s.stop();
  for (const x of servers.splice(0)) await x.stop();
});

/** Waiting on sluice's log: generous, a busy host can hold a process for seconds. */
const EVENT_MS = 30_000;

/** Quick reconnects: the reference's variables tune sluice's own --config-xds too. */
const FAST = { XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: "50ms", XDS_CLIENT_BACKOFF_MAX_INTERVAL: "200ms", CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: "50ms" };

function limits(domain: string, perKey: Record<string, number>, name = domain): RateLimitConfigMsg {
  return {
    name,
    domain,
    descriptors: Object.entries(perKey).map(([key, n]) => ({ key, rate_limit: { unit: UNIT.HOUR, requests_per_unit: n } })),
  };
}

async function server(o: Parameters<typeof startXdsServer>[0] = {}) {
  const x = await startXdsServer(o);
  servers.push(x);
  return x;
}

async function sluice(args: string[], env: Record<string, string> = {}, credentials?: grpc.ChannelCredentials) {
  const s = await startSluice(args, env);
  sluices.push(s);
  const c = rlsClient(s.port, credentials);
  clients.push(c);
  return { s, c };
}

async function hits(c: RlsClient, domain: string, key: string, n: number): Promise<number[]> {
  const codes: number[] = [];
  for (let i = 0; i < n; i++) codes.push((await c.shouldRateLimit({ domain, descriptors: [descriptor({ [key]: "v" })] })).overall_code);
  return codes;
}

async function readyz(adminPort: number) {
  const res = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
  return { status: res.status, body: (await res.json()) as { ready: boolean; rules: { domains: Record<string, number>; xds: Record<string, unknown> } } };
}

describe("rules from an xDS server (--config-xds)", () => {
  beforeAll(() => roomInWindow(3600, 60));

  it("waits for the first config, ACKs it with version and nonce, then decides by it", async () => {
    const x = await server();
    const starting = sluice(["--config-xds", `127.0.0.1:${x.port}`], {
      SLUICE_XDS_NODE_ID: "sluice-test",
      CONFIG_GRPC_XDS_NODE_METADATA: "zone=a,team=edge",
      CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: "x-tenant:blue",
    });
    const first = await x.waitForRequest(() => true);
    expect(first).toMatchObject({
      version_info: "",
      response_nonce: "",
      type_url: "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig",
      node: { id: "sluice-test", metadata: { fields: { zone: { stringValue: "a" }, team: { stringValue: "edge" } } }, user_agent_name: "sluice" },
    });
    expect(first.headers["x-tenant"]).toBe("blue");
    x.setConfigs("v1", [limits("web", { client: 2 })]);
    const { s, c } = await starting;
    const ack = await x.waitForRequest((r) => r.version_info === "v1");
    expect([ack.response_nonce, ack.error_detail]).toEqual(["1", undefined]);
    expect(await hits(c, "web", "client", 3)).toEqual([OK, OK, OVER_LIMIT]);
    expect(await c.health()).toBe(1); // SERVING
    const r = await readyz(s.adminPort);
    expect([r.status, r.body.rules.domains, r.body.rules.xds]).toMatchObject([
      200,
      { web: 1 },
      { connected: true, received: true, version: "v1", updates: 1, rejected: 0 },
    ]);
  });

  it("an invalid first config is NACKed and sluice keeps waiting; the next valid one starts it", async () => {
    const x = await server();
    x.setConfigs("1", [{ name: "bad", domain: "web", descriptors: [{ key: "client", rate_limit: { unit: UNIT.HOUR }, descriptors: [{ key: "" }] }] }]);
    const starting = sluice(["--config-xds", `127.0.0.1:${x.port}`]);
    const nack = await x.waitForRequest((r) => r.error_detail !== undefined);
    expect([nack.version_info, nack.error_detail?.message]).toEqual(["", "bad: web.client: descriptor has empty key"]);
    x.setConfigs("2", [limits("web", { client: 1 })]);
    const { c } = await starting;
    expect(await hits(c, "web", "client", 2)).toEqual([OK, OVER_LIMIT]);
  });

  it("a pushed update is in force at once; counters of unchanged rules are kept", async () => {
    const x = await server();
    x.setConfigs("1", [limits("web", { keep: 3, edit: 5 })]);
    const { s, c } = await sluice(["--config-xds", `127.0.0.1:${x.port}`]);
    expect(await hits(c, "web", "keep", 2)).toEqual([OK, OK]);
    expect(await hits(c, "web", "edit", 2)).toEqual([OK, OK]);
    x.setConfigs("2", [limits("web", { keep: 3, edit: 1 }), limits("api", { token: 1 })]);
    // The ACK follows the swap: the first calls after it meet the new rules. How soon it comes is the host's
    // business (the rules compile in a process of their own), so the wait is the helper's generous default.
    await x.waitForRequest((r) => r.version_info === "2");
    expect(await hits(c, "web", "keep", 2)).toEqual([OK, OVER_LIMIT]); // 2 + 1 of 3: the count went on
    expect(await hits(c, "web", "edit", 1)).toEqual([OVER_LIMIT]); // 2 already counted against the new 1
    expect(await hits(c, "api", "token", 2)).toEqual([OK, OVER_LIMIT]);
    const m = await scrape(s.adminPort);
    expect(sampleValue(m, "sluice_xds_responses_total", { result: "ack" })).toBe(2);
    expect(sampleValue(m, "sluice_config_loads_total", { result: "success" })).toBe(2);
  });

  it("a response with no resources is NACKed (every limit would go) unless --allow-empty-rules, which applies it", async () => {
    const x = await server();
    x.setConfigs("1", [limits("web", { client: 1 })]);
    const guarded = await sluice(["--config-xds", `127.0.0.1:${x.port}`]);
    const open = await sluice(["--config-xds", `127.0.0.1:${x.port}`, "--allow-empty-rules"]);
    x.setConfigs("2", []);
    const nack = await x.waitForRequest((r) => r.error_detail !== undefined);
    expect([nack.version_info, nack.error_detail?.message]).toEqual([
      "1",
      "(response): (top): the response holds no RateLimitConfig resources: sluice would enforce no limits; the last good rules keep serving (give --allow-empty-rules, or SLUICE_ALLOW_EMPTY_RULES=true, to apply an empty set)",
    ]);
    expect(await hits(guarded.c, "web", "client", 2)).toEqual([OK, OVER_LIMIT]);
    // The other sluice ACKs version 2 and enforces nothing.
    await x.waitForRequest((r) => r.version_info === "2" && r.error_detail === undefined);
    expect(await hits(open.c, "web", "client", 3)).toEqual([OK, OK, OK]);
    expect((await readyz(open.s.adminPort)).body.rules.domains).toEqual({});
  });

  it("an invalid push is NACKed with error_detail naming resource and problem; the last good rules keep serving", async () => {
    const x = await server();
    x.setConfigs("1", [limits("web", { client: 1 })]);
    const { s, c } = await sluice(["--config-xds", `127.0.0.1:${x.port}`]);
    x.setConfigs("2", [
      limits("web", { client: 100 }, "web-rules"),
      { name: "broken", domain: "api", descriptors: [{ key: "token", rate_limit: { unit: UNIT.UNKNOWN, requests_per_unit: 5 } }] },
    ]);
    const nack = await x.waitForRequest((r) => r.error_detail !== undefined);
    // A NACK carries the version in force and the refused response's nonce.
    expect([nack.version_info, nack.response_nonce, nack.error_detail]).toEqual([
      "1",
      "2",
      { code: 3, message: "broken: api.token: rate limit unit must be set (invalid rate limit unit '')", details: [] },
    ]);
    expect(await hits(c, "web", "client", 2)).toEqual([OK, OVER_LIMIT]);
    const r = await readyz(s.adminPort);
    expect(r.body.rules.xds).toMatchObject({
      version: "1",
      updates: 1,
      rejected: 1,
      lastRejection: "broken: api.token: rate limit unit must be set (invalid rate limit unit '')",
    });
    const m = await scrape(s.adminPort);
    expect([sampleValue(m, "sluice_xds_responses_total", { result: "nack" }), sampleValue(m, "sluice_config_loads_total", { result: "error" })]).toEqual([
      1, 1,
    ]);
    // The next valid set is taken again.
    x.setConfigs("3", [limits("web", { client: 3 })]);
    await x.waitForRequest((r) => r.version_info === "3" && r.error_detail === undefined);
    expect(await hits(c, "web", "client", 1)).toEqual([OK]);
  });

  it("a resource of another type and a duplicate domain are NACKed too", async () => {
    const x = await server();
    x.setConfigs("1", [limits("web", { client: 1 })]);
    await sluice(["--config-xds", `127.0.0.1:${x.port}`]);
    x.setResources("2", [{ type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster", value: new Uint8Array() }]);
    const wrongType = await x.waitForRequest((r) => r.response_nonce === "2");
    expect(wrongType.error_detail?.message).toBe(
      "resource[0]: (top): type type.googleapis.com/envoy.config.cluster.v3.Cluster is not type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig",
    );
    x.setConfigs("3", [limits("web", { a: 1 }, "one"), limits("web", { b: 1 }, "two")]);
    const dup = await x.waitForRequest((r) => r.response_nonce === "3");
    expect(dup.error_detail?.message).toBe("two: web: duplicate domain 'web' in config file (also in one)");
    // A response of another type on the ADS stream: refused as a whole.
    x.setResources("4", [], "type.googleapis.com/envoy.config.listener.v3.Listener");
    const otherResponse = await x.waitForRequest((r) => r.response_nonce === "4");
    expect([otherResponse.version_info, otherResponse.error_detail?.message]).toEqual([
      "1",
      "sluice subscribes only to type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig, not type.googleapis.com/envoy.config.listener.v3.Listener",
    ]);
  });

  it("a changed resource that joins an unchanged one's domain is judged with both (a reload sends only changed bytes)", async () => {
    const x = await server();
    x.setConfigs("1", [limits("web", { a: 1 }, "one"), limits("api", { b: 1 }, "two")]);
    const plain = await sluice(["--config-xds", `127.0.0.1:${x.port}`]);
    const merging = await sluice(["--config-xds", `127.0.0.1:${x.port}`, "--merge-domains"]);
    // "one" unchanged: its bytes stay behind, and the compile asks for them when "two" moves into its domain.
    x.setConfigs("2", [limits("web", { a: 1 }, "one"), limits("web", { b: 1 }, "two")]);
    const dup = await x.waitForRequest((r) => r.error_detail !== undefined);
    expect(dup.error_detail?.message).toBe("two: web: duplicate domain 'web' in config file (also in one)");
    expect(await hits(plain.c, "api", "b", 2)).toEqual([OK, OVER_LIMIT]);
    // Merged: both resources' limits in force in the one domain.
    await x.waitForRequest((r) => r.version_info === "2" && r.error_detail === undefined);
    expect(await hits(merging.c, "web", "a", 2)).toEqual([OK, OVER_LIMIT]);
    expect(await hits(merging.c, "web", "b", 2)).toEqual([OK, OVER_LIMIT]);
    expect((await readyz(merging.s.adminPort)).body.rules.domains).toEqual({ web: 2 });
  });

  it("a restarted control plane: sluice keeps serving, reconnects and resyncs", async () => {
    const port = await freePort();
    let x = await server({ port });
    x.setConfigs("1", [limits("web", { client: 1 })]);
    const { s, c } = await sluice(["--config-xds", `127.0.0.1:${port}`], FAST);
    await x.stop();
    servers.splice(servers.indexOf(x), 1);
    await s.waitForLog((l) => l.msg === "xDS server unavailable; the rules in force keep serving", EVENT_MS);
    expect(await hits(c, "web", "client", 2)).toEqual([OK, OVER_LIMIT]);
    expect((await readyz(s.adminPort)).body.rules.xds).toMatchObject({ connected: false, received: true, version: "1" });
    x = await server({ port });
    x.setConfigs("2", [limits("web", { client: 5 })]);
    const resync = await x.waitForRequest((r) => r.version_info === "2");
    expect(resync.error_detail).toBeUndefined();
    // The first request on the new stream told the server what sluice had.
    expect(x.requests[0].version_info).toBe("1");
    expect(await hits(c, "web", "client", 1)).toEqual([OK]);
    const m = await scrape(s.adminPort);
    expect(sampleValue(m, "sluice_xds_reconnects_total")).toBeGreaterThanOrEqual(1);
    expect(sampleValue(m, "sluice_xds_connected")).toBe(1);
  });

  it("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES bounds a response: a larger one is not taken, the rules in force stay", async () => {
    const x = await server();
    x.setConfigs("1", [limits("web", { client: 1 })]);
    const { s, c } = await sluice(["--config-xds", `127.0.0.1:${x.port}`], { ...FAST, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: "2048" });
    const many = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`key-${i}`, 10]));
    x.setConfigs("2", [limits("web", { client: 5, ...many })]);
    const failed = await s.waitForLog((l) => l.msg === "xDS server unavailable; the rules in force keep serving", EVENT_MS);
    expect(failed.reason).toMatch(/larger than max/i);
    expect(x.requests.some((r) => r.version_info === "2")).toBe(false);
    expect(await hits(c, "web", "client", 2)).toEqual([OK, OVER_LIMIT]);
  });

  it("--workers: each worker subscribes on its own stream and serves once it has the rules", async () => {
    const x = await server();
    x.setConfigs("1", [limits("web", { client: 1 })]);
    const { c } = await sluice(["--config-xds", `127.0.0.1:${x.port}`, "--workers", "2"]);
    await x.waitForRequest((r) => r.version_info === "1" && r.stream === 2);
    expect(x.streamsOpened()).toBe(2);
    expect(await hits(c, "web", "client", 1)).toEqual([OK]);
  });

  it("FORCE_START_WITHOUT_INITIAL_CONFIG: serves at once with no rules, then takes the first config", async () => {
    const x = await server();
    const { s, c } = await sluice(["--config-xds", `127.0.0.1:${x.port}`], { FORCE_START_WITHOUT_INITIAL_CONFIG: "true" });
    expect(await hits(c, "web", "client", 2)).toEqual([OK, OK]);
    expect((await readyz(s.adminPort)).body.rules.xds).toMatchObject({ received: false, version: "" });
    x.setConfigs("1", [limits("web", { client: 1 })]);
    await x.waitForRequest((r) => r.version_info === "1");
    expect(await hits(c, "web", "client", 2)).toEqual([OK, OVER_LIMIT]);
  });
});

describe("TLS to the control plane", () => {
  let certs: ReturnType<typeof certFactory>;
  let ca: Pem, serverPem: Pem, client: Pem, otherCa: Pem;

  beforeAll(() => {
    certs = certFactory();
    ca = certs.ca("xds-ca");
    otherCa = certs.ca("other-ca");
    serverPem = certs.issue(ca, "xds-server", "server");
    client = certs.issue(ca, "sluice-client", "client");
  });

  it("mTLS: sluice trusts only the given CA and presents its client certificate", async () => {
    const x = await server({ tls: { cert: serverPem.cert, key: serverPem.key, ca: ca.cert } });
    x.setConfigs("1", [limits("web", { client: 1 })]);
    const env = { SLUICE_XDS_TLS: "true", SLUICE_XDS_TLS_CA: ca.cert, SLUICE_XDS_TLS_CERT: client.cert, SLUICE_XDS_TLS_KEY: client.key };
    const { c } = await sluice(["--config-xds", `127.0.0.1:${x.port}`], env);
    expect(await hits(c, "web", "client", 2)).toEqual([OK, OVER_LIMIT]);
  });

  it("the client certificate files are read at every connection: a rotated one is used from the next", async () => {
    const x = await server({ tls: { cert: serverPem.cert, key: serverPem.key, ca: ca.cert } });
    x.setConfigs("1", [limits("web", { client: 1 })]);
    const stranger = certs.issue(otherCa, "stranger", "client");
    const [certFile, keyFile] = [`${certs.dir}/rotating.pem`, `${certs.dir}/rotating.key`];
    fs.copyFileSync(stranger.cert, certFile);
    fs.copyFileSync(stranger.key, keyFile);
    const env = {
      ...FAST,
      SLUICE_XDS_TLS: "true",
      SLUICE_XDS_TLS_CA: ca.cert,
      SLUICE_XDS_TLS_CERT: certFile,
      SLUICE_XDS_TLS_KEY: keyFile,
      FORCE_START_WITHOUT_INITIAL_CONFIG: "true",
    };
    const { s, c } = await sluice(["--config-xds", `127.0.0.1:${x.port}`], env);
    await s.waitForLog((l) => l.msg === "xDS server unavailable; the rules in force keep serving", EVENT_MS);
    expect(x.requests).toEqual([]);
    fs.copyFileSync(client.key, keyFile);
    fs.copyFileSync(client.cert, certFile);
    await x.waitForRequest((r) => r.version_info === "1");
    expect(await hits(c, "web", "client", 2)).toEqual([OK, OVER_LIMIT]);
  });

  it("SLUICE_XDS_TLS_SERVER_NAME (CONFIG_GRPC_XDS_SERVER_TLS_SAN) is the name the server certificate must carry", async () => {
    const x = await server({ tls: { cert: serverPem.cert, key: serverPem.key } });
    x.setConfigs("1", [limits("web", { client: 1 })]);
    const env = {
      ...FAST,
      CONFIG_TYPE: "GRPC_XDS_SOTW",
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${x.port}`,
      CONFIG_GRPC_XDS_SERVER_USE_TLS: "true",
      CONFIG_GRPC_XDS_SERVER_TLS_CACERT: ca.cert,
    };
    const wrong = await sluice([], { ...env, CONFIG_GRPC_XDS_SERVER_TLS_SAN: "wrong.example", FORCE_START_WITHOUT_INITIAL_CONFIG: "true" });
    const failed = await wrong.s.waitForLog((l) => l.msg === "xDS server unavailable; the rules in force keep serving", EVENT_MS);
    expect(failed.reason).toMatch(/wrong\.example/);
    expect(x.requests).toEqual([]);
    const { c } = await sluice([], { ...env, CONFIG_GRPC_XDS_SERVER_TLS_SAN: "localhost" });
    expect(await hits(c, "web", "client", 2)).toEqual([OK, OVER_LIMIT]);
  });

  it("a server certificate from another CA is not trusted: no rules are taken", async () => {
    const x = await server({ tls: { cert: serverPem.cert, key: serverPem.key } });
    x.setConfigs("1", [limits("web", { client: 1 })]);
    const env = { ...FAST, SLUICE_XDS_TLS: "true", SLUICE_XDS_TLS_CA: otherCa.cert, FORCE_START_WITHOUT_INITIAL_CONFIG: "true" };
    const { s } = await sluice(["--config-xds", `127.0.0.1:${x.port}`], env);
    await s.waitForLog((l) => l.msg === "xDS server unavailable; the rules in force keep serving", EVENT_MS);
    expect(x.requests).toEqual([]);
    expect((await readyz(s.adminPort)).body.rules.xds).toMatchObject({ connected: false, received: false });
  });
});

describe("Envoy Gateway's Deployment environment", () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("starts with the env vars its rate-limit Deployment sets, takes its RateLimitConfigs and serves over TLS", async () => {
    const certs = certFactory();
    const ca = certs.ca("eg-ca");
    // Envoy Gateway's one certificate (Secret envoy-rate-limit) serves both sides: sluice's gRPC and its xDS client.
    const tls = certs.issue(ca, "envoy-rate-limit", "server");
    const client = certs.issue(ca, "envoy-rate-limit-client", "client");
    const x = await server({ tls: { cert: tls.cert, key: tls.key, ca: ca.cert } });
    const [httpPort, promPort] = [await freePort(), await freePort()];
    // As internal/infrastructure/kubernetes/ratelimit/resource.go writes them (ports and paths of this test).
    const env = {
      RUNTIME_ROOT: "/data",
      RUNTIME_SUBDIRECTORY: "ratelimit",
      RUNTIME_IGNOREDOTFILES: "true",
      RUNTIME_WATCH_ROOT: "false",
      LOG_LEVEL: "info",
      USE_STATSD: "false",
      CONFIG_TYPE: "GRPC_XDS_SOTW",
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${x.port}`,
      CONFIG_GRPC_XDS_NODE_ID: "envoy-ratelimit",
      GRPC_SERVER_USE_TLS: "true",
      GRPC_SERVER_TLS_CERT: tls.cert,
      GRPC_SERVER_TLS_KEY: tls.key,
      GRPC_SERVER_TLS_CA_CERT: ca.cert,
      CONFIG_GRPC_XDS_SERVER_USE_TLS: "true",
      CONFIG_GRPC_XDS_CLIENT_TLS_CERT: client.cert,
      CONFIG_GRPC_XDS_CLIENT_TLS_KEY: client.key,
      CONFIG_GRPC_XDS_SERVER_TLS_CACERT: ca.cert,
      FORCE_START_WITHOUT_INITIAL_CONFIG: "true",
      REDIS_SOCKET_TYPE: "tcp",
      REDIS_URL: `127.0.0.1:${redis.port}`,
      USE_PROMETHEUS: "true",
      PROMETHEUS_ADDR: `:${promPort}`,
      PROMETHEUS_MAPPER_YAML: "/etc/statsd-exporter/conf.yaml",
      // The reference's /healthcheck port its probes use: 8080 by default; a free one on this host.
      PORT: String(httpPort),
    };
    const { s, c } = await sluice([], env, grpc.credentials.createSsl(fs.readFileSync(ca.cert)));
    const first = await x.waitForRequest(() => true);
    expect(first.node?.id).toBe("envoy-ratelimit");
    expect((await fetch(`http://127.0.0.1:${httpPort}/healthcheck`)).status).toBe(200);
    // The shape Envoy Gateway's translator gives a route's global rate limit (internal/xds/translator/ratelimit.go).
    x.setConfigs("1", [
      {
        name: "default/eg/http",
        domain: "default/eg/http",
        descriptors: [
          {
            key: "httproute/default/backend/rule/0/match/0/example_com",
            value: "httproute/default/backend/rule/0/match/0/example_com",
            descriptors: [{ key: "rule-0-match-0", rate_limit: { unit: UNIT.HOUR, requests_per_unit: 2 } }],
          },
        ],
      },
    ]);
    await x.waitForRequest((r) => r.version_info === "1");
    const route = "httproute/default/backend/rule/0/match/0/example_com";
    const req = {
      domain: "default/eg/http",
      descriptors: [
        descriptor([
          [route, route],
          ["rule-0-match-0", "x-user-1"],
        ]),
      ],
    };
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await c.shouldRateLimit(req)).overall_code);
    expect(codes).toEqual([OK, OK, OVER_LIMIT]);
    const prom = await fetch(`http://127.0.0.1:${promPort}/metrics`);
    expect(prom.status).toBe(200);
    // Every variable it set and sluice does not use is named at start (none is refused).
    await s.waitForLog((l) => l.variable === "PROMETHEUS_MAPPER_YAML");
    await s.waitForLog((l) => l.variable === "RUNTIME_ROOT");
  });
});
