// The reference's HTTP surface on a real `sluice serve` started from a reference-style environment
// (RUNTIME_* layout, REDIS_SOCKET_TYPE/REDIS_URL, HOST/PORT, DEBUG_*, USE_PROMETHEUS) with a real
// redis-server: GET /healthcheck, POST /json (sharing counters with gRPC), GET /rlconfig, the metrics
// listeners, the health rules, FORCE_START_WITHOUT_INITIAL_CONFIG and a unix-socket Redis.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, rlsClient } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

const RULES = `
domain: web
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: path
    value: "/admin"
    rate_limit: {name: admin, unit: minute, requests_per_unit: 0}
`;

/** RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/<files>, as the reference lays rules out. */
function runtimeRoot(files: Record<string, string>, sub = "ratelimit"): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-runtime-"));
  fs.mkdirSync(path.join(root, sub, "config"), { recursive: true });
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(root, sub, "config", name), text);
  return root;
}

/** A reference-style environment; every listener on 127.0.0.1 and a free port. */
function referenceEnv(root: string, redis: RedisProcess, extra: Record<string, string> = {}): Record<string, string> {
  return {
    RUNTIME_ROOT: root,
    RUNTIME_SUBDIRECTORY: "ratelimit",
    RUNTIME_IGNOREDOTFILES: "true",
    REDIS_SOCKET_TYPE: "tcp",
    REDIS_URL: `127.0.0.1:${redis.port}`,
    HOST: "127.0.0.1",
    PORT: "0",
    DEBUG_HOST: "127.0.0.1",
    DEBUG_PORT: "0",
    USE_STATSD: "false",
    // Exact counts on a busy host: a store call must not time out into the failure policy.
    SLUICE_STORE_TIMEOUT_MS: "2000",
    ...extra,
  };
}

/** The reference's key of an hour limit now, by Redis's clock: `base` then the hour's start. */
async function hourKey(r: RedisProcess, base: string): Promise<string> {
  const now = Number((await r.cli("TIME")).split("\n")[0]);
  return base + Math.floor(now / 3600) * 3600;
}

/** The ports the `listening` line names. */
async function ports(s: SluiceProcess): Promise<Record<string, number>> {
  return s.waitForLog((l) => l.msg === "listening");
}

async function http(port: number, urlPath: string, init: RequestInit = {}): Promise<{ status: number; type: string | null; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${urlPath}`, init);
  return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
}

const postJson = (port: number, body: unknown) => http(port, "/json", { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body) });

const running: { stop(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});
async function sluiceWith(env: Record<string, string>, args: string[] = []): Promise<SluiceProcess> {
  const s = await startSluice(args, { SLUICE_LOG_FORMAT: "json", ...env });
  running.push(s);
  return s;
}

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describe("the HTTP port (HOST/PORT): /healthcheck and /json", () => {
  it("healthcheck answers 200 OK; /json decides with the gRPC path's counters and answers protobuf JSON", async () => {
    const s = await sluiceWith(referenceEnv(runtimeRoot({ "web.yaml": RULES }), redis));
    const { httpPort } = await ports(s);
    expect(await http(httpPort, "/healthcheck")).toEqual({ status: 200, type: "text/plain; charset=utf-8", body: "OK" });

    await roomInWindow(3600, 30, redisClock(redis));
    const request = { domain: "web", descriptors: [{ entries: [{ key: "client", value: "c1" }] }] };
    const answers = [];
    for (let i = 0; i < 2; i++) answers.push(await postJson(httpPort, request));
    // The third hit through gRPC: one counter for both ways in.
    const client = rlsClient(s.port);
    const grpcAnswer = await client.shouldRateLimit({ domain: "web", descriptors: [descriptor({ client: "c1" })] });
    client.close();
    answers.push(await postJson(httpPort, { domain: "web", descriptors: [{ entries: [{ key: "client", value: "c1" }] }], hitsAddend: "1" }));

    const parsed = answers.map((a) => ({ status: a.status, type: a.type, json: JSON.parse(a.body) }));
    const resets = parsed.map((p) => p.json.statuses[0].durationUntilReset as string);
    for (const r of resets) expect(r).toMatch(/^\d+s$/);
    for (const p of parsed) delete p.json.statuses[0].durationUntilReset;
    expect([grpcAnswer.overall_code, grpcAnswer.statuses[0].limit_remaining]).toEqual([OK, 0]);
    const limit = { requestsPerUnit: 3, unit: "HOUR" };
    expect(parsed).toEqual([
      { status: 200, type: "application/json", json: { overallCode: "OK", statuses: [{ code: "OK", currentLimit: limit, limitRemaining: 2 }] } },
      { status: 200, type: "application/json", json: { overallCode: "OK", statuses: [{ code: "OK", currentLimit: limit, limitRemaining: 1 }] } },
      {
        status: 429,
        type: "application/json",
        json: {
          overallCode: "OVER_LIMIT",
          statuses: [{ code: "OVER_LIMIT", currentLimit: limit }],
          responseHeadersToAdd: [
            { key: "content-type", value: "application/json" },
            { key: "Retry-After", value: resets[2].slice(0, -1) },
          ],
          rawBody: Buffer.from(`{"error":"rate_limited","retry_after_seconds":${resets[2].slice(0, -1)}}`).toString("base64"),
        },
      },
    ]);
    // The counter is Redis's, under the reference's own key (its environment: SLUICE_REFERENCE_KEYS), and
    // the refused fourth hit counts too, as the reference counts.
    expect((await redis.cli("GET", await hourKey(redis, "web_client_c1_"))).trim()).toBe("4");
  });

  it("bad input: 400 with the reason; other methods 405; an oversized body 413; unknown paths 404", async () => {
    const s = await sluiceWith(referenceEnv(runtimeRoot({ "web.yaml": RULES }), redis), []);
    const { httpPort } = await ports(s);
    expect(await postJson(httpPort, "{not json")).toEqual({
      status: 400,
      type: "text/plain; charset=utf-8",
      body: `Bad Request: body is not JSON: ${jsonSyntaxMessage("{not json")}\n`,
    });
    expect((await postJson(httpPort, { domain: "web", descriptors: [{ entries: [{ key: "client", value: 7 }] }] })).body).toBe(
      "Bad Request: descriptors[0].entries[0].value must be a string\n",
    );
    expect(await postJson(httpPort, { domain: "", descriptors: [{ entries: [{ key: "client", value: "c" }] }] })).toEqual({
      status: 400,
      type: "text/plain; charset=utf-8",
      body: "Bad Request: domain must not be empty\n",
    });
    expect((await postJson(httpPort, { domain: "web", descriptors: [] })).body).toBe("Bad Request: request has no descriptors\n");
    expect((await postJson(httpPort, { domain: "web", descriptors: new Array(65).fill({ entries: [] }) })).body).toBe(
      "Bad Request: request has 65 descriptors, more than the maximum 64\n",
    );
    const get = await fetch(`http://127.0.0.1:${httpPort}/json`);
    expect([get.status, get.headers.get("allow"), await get.text()]).toEqual([405, "POST", "method not allowed\n"]);
    // Over SLUICE_MAX_MESSAGE_BYTES, announced or streamed: 413 before the rest is read.
    const tooLarge = "HTTP/1.1 413 Payload Too Large";
    expect(await rawPost(httpPort, "content-length: 2097152", "x".repeat(10))).toEqual([tooLarge, "request body larger than 1048576 bytes\n"]);
    expect(await rawPost(httpPort, "transfer-encoding: chunked", `100001\r\n${"x".repeat(0x100001)}\r\n`)).toEqual([
      tooLarge,
      "request body larger than 1048576 bytes\n",
    ]);
    expect((await http(httpPort, "/rlconfig")).status).toBe(404);
    // A refusal without a store call (requests_per_unit: 0) and an unknown domain.
    const blocked = await postJson(httpPort, { domain: "web", descriptors: [{ entries: [{ key: "path", value: "/admin" }] }] });
    expect([blocked.status, JSON.parse(blocked.body).statuses]).toEqual([
      429,
      [{ code: "OVER_LIMIT", currentLimit: { name: "admin", unit: "MINUTE" }, durationUntilReset: "60s" }],
    ]);
    expect(await postJson(httpPort, { domain: "other", descriptors: [{ entries: [{ key: "k", value: "v" }] }] })).toEqual({
      status: 200,
      type: "application/json",
      body: '{"overallCode":"OK","statuses":[{"code":"OK"}]}',
    });
  });
});

/**
 * POST /json over a raw socket that sends `body` and then nothing more: [status line, response body].
 * (A client still writing when the server answers 413 and closes would see a reset instead.)
 */
function rawPost(port: number, header: string, body: string): Promise<[string, string]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => {
      socket.write(`POST /json HTTP/1.1\r\nhost: 127.0.0.1\r\n${header}\r\n\r\n${body}`);
    });
    let text = "";
    socket.on("data", (c) => (text += c.toString()));
    socket.on("error", reject);
    socket.on("close", () => {
      const [head, ...rest] = text.split("\r\n\r\n");
      resolve([head.split("\r\n")[0], rest.join("\r\n\r\n")]);
    });
  });
}

/** The message JSON.parse gives for `text` in this Node version. */
function jsonSyntaxMessage(text: string): string {
  try {
    JSON.parse(text);
  } catch (err) {
    return (err as Error).message;
  }
  return "";
}

describe("the debug port (DEBUG_HOST/DEBUG_PORT) and USE_PROMETHEUS", () => {
  it("/rlconfig lists the loaded limits in the reference's format; /metrics at PROMETHEUS_ADDR + PROMETHEUS_PATH and the admin port, not there", async () => {
    const s = await sluiceWith(
      referenceEnv(runtimeRoot({ "web.yaml": RULES }), redis, {
        USE_PROMETHEUS: "true",
        PROMETHEUS_ADDR: "127.0.0.1:0",
        PROMETHEUS_PATH: "/prom",
        EXTRA_TAGS: "team:edge",
      }),
    );
    const { httpPort, debugPort, prometheusPort, adminPort } = await ports(s);
    expect(await http(debugPort, "/rlconfig")).toEqual({
      status: 200,
      type: "text/plain; charset=utf-8",
      body:
        "web.client: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false\n" +
        "web.path_/admin: unit=MINUTE requests_per_unit=0, shadow_mode: false, quota_mode: false\n",
    });
    expect((await http(debugPort, "/")).body).toBe(
      "/debug/pprof/: not available: sluice is not a Go program (the answer says what to use)\n" +
        "/rlconfig: print out the currently loaded configuration for debugging\n/stats: print out stats\n",
    );
    await postJson(httpPort, { domain: "web", descriptors: [{ entries: [{ key: "path", value: "/admin" }] }] });
    const line = 'sluice_rule_over_limit_total{domain="web",rule="web.path_/admin",limit="rate_limit",team="edge"} 1';
    expect((await http(debugPort, "/metrics")).status).toBe(404);
    for (const [port, p] of [
      [prometheusPort, "/prom"],
      [adminPort, "/metrics"],
    ] as const) {
      const m = await http(port, p);
      expect([m.status, m.body.split("\n").filter((l) => l.startsWith('sluice_rule_over_limit_total{domain="web",rule="web.path_/admin"'))]).toEqual([
        200,
        [line],
      ]);
    }
    expect((await http(prometheusPort, "/metrics")).status).toBe(404);
  });
});

describe("health rules and start without rules", () => {
  it("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED + FORCE_START_WITHOUT_INITIAL_CONFIG: serves while the rules do not load, healthy once they do", async () => {
    const root = runtimeRoot({ "web.yaml": "domain: web\ndescriptors:\n  - key: client\n    rate_limit: {unit: fortnight}\n" });
    const s = await sluiceWith(referenceEnv(root, redis, { FORCE_START_WITHOUT_INITIAL_CONFIG: "true", HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: "true" }));
    const { httpPort } = await ports(s);
    expect(await http(httpPort, "/healthcheck")).toEqual({ status: 500, type: "text/plain; charset=utf-8", body: "" });
    const before = await postJson(httpPort, { domain: "web", descriptors: [{ entries: [{ key: "client", value: "x" }] }] });
    expect([before.status, before.body]).toEqual([200, '{"overallCode":"OK","statuses":[{"code":"OK"}]}']);

    fs.writeFileSync(path.join(root, "ratelimit", "config", "web.yaml"), RULES);
    await until(async () => (await http(httpPort, "/healthcheck")).status === 200, 15_000, "/healthcheck to answer 200", 50);
    const after = await postJson(httpPort, { domain: "web", descriptors: [{ entries: [{ key: "path", value: "/admin" }] }] });
    expect(after.status).toBe(429);
  });

  it("without FORCE_START_WITHOUT_INITIAL_CONFIG, rules that do not load stop the start", async () => {
    const root = runtimeRoot({ "web.yaml": "domain: web\ndescriptors: 5\n" });
    const r = runCli(["serve", "--port", "0", "--admin-port", "0"], referenceEnv(root, redis));
    expect(r.code).toBe(1);
    const invalid = r.stdout
      .split("\n")
      .filter((l) => l.includes('"msg":"invalid rule"'))
      .map((l) => JSON.parse(l).file);
    expect(invalid).toEqual([path.join(root, "ratelimit", "config", "web.yaml")]);
  });

  it("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: unhealthy while Redis is away, healthy again when it is back", async () => {
    const own = await startRedis();
    try {
      const s = await sluiceWith(referenceEnv(runtimeRoot({ "web.yaml": RULES }), own, { REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: "true" }));
      const { httpPort } = await ports(s);
      expect((await http(httpPort, "/healthcheck")).status).toBe(200);
      own.kill();
      await until(async () => (await http(httpPort, "/healthcheck")).status === 500, 15_000, "/healthcheck to answer 500", 50);
      await own.restart();
      await until(async () => (await http(httpPort, "/healthcheck")).status === 200, 15_000, "/healthcheck to answer 200", 50);
    } finally {
      await own.stop();
    }
  });
});

describe("Redis over a unix socket (REDIS_SOCKET_TYPE=unix)", () => {
  it("counts in the Redis behind the socket", async () => {
    const socket = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sluice-sock-")), "redis.sock");
    const viaSocket = await startRedis({ args: ["--unixsocket", socket, "--unixsocketperm", "700"] });
    try {
      const env = referenceEnv(runtimeRoot({ "web.yaml": RULES }), viaSocket, { REDIS_SOCKET_TYPE: "unix", REDIS_URL: socket });
      const s = await sluiceWith(env);
      const { httpPort } = await ports(s);
      await roomInWindow(3600, 30, redisClock(viaSocket));
      const codes = [];
      for (let i = 0; i < 4; i++)
        codes.push((await postJson(httpPort, { domain: "web", descriptors: [{ entries: [{ key: "client", value: "sock" }] }] })).status);
      expect(codes).toEqual([200, 200, 200, 429]);
      expect((await viaSocket.cli("GET", await hourKey(viaSocket, "web_client_sock_"))).trim()).toBe("4");
    } finally {
      await viaSocket.stop();
    }
  });
});

describe("a reference variable sluice cannot honour stops the start", () => {
  it("exit 2, naming the variable", () => {
    const r = runCli(["serve", "--port", "0", "--admin-port", "0"], { BACKEND_TYPE: "memcache" });
    expect(r.code).toBe(2);
    expect(r.stderr.split("\n")[0]).toBe(
      "sluice: BACKEND_TYPE=memcache (envoyproxy/ratelimit setting): sluice has no memcached store: use Redis (BACKEND_TYPE=redis and REDIS_URL)",
    );
  });
});
