// envoyproxy/ratelimit's environment -> Settings: each group of variables honoured, ignored with a note,
// or refused with a message naming the variable; precedence flag > SLUICE_* > reference > default.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readReferenceEnv } from "../../src/settings/reference/env.js";
import { serveSettings, UsageError, type Settings } from "../../src/settings/settings.js";
import { certFactory } from "../helpers/certs.js";
import { COMPAT_DIR } from "../helpers/compat.js";

const settings = (env: Record<string, string>, argv: string[] = []): Settings => serveSettings(argv, env);

/** The usage error's message, exactly. */
function refusal(env: Record<string, string>, argv: string[] = []): string {
  try {
    serveSettings(argv, env);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error("no usage error");
}

const notes = (s: Settings) => s.referenceNotes.map((n) => `${n.variable}${n.differs ? "*" : ""}`);

/** The reference's variables and defaults, as listed for this work. */
function referenceList(): Map<string, string> {
  const text = fs.readFileSync(path.join(COMPAT_DIR, "settings-env.txt"), "utf8");
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^([A-Z0-9_]+)(?: (.*))?$/.exec(line);
    if (m) out.set(m[1], m[2] ?? "");
  }
  return out;
}

describe("no reference variable: sluice's defaults, nothing else", () => {
  it("every default as before and every reference-only setting off", () => {
    const s = settings({});
    expect({
      configDir: s.configDir,
      port: s.port,
      host: s.host,
      adminPort: s.adminPort,
      adminHost: s.adminHost,
      logLevel: s.logLevel,
      logFormat: s.logFormat,
      redisUrls: s.redisUrls,
      redisCluster: s.redisCluster,
      redisSentinel: s.redisSentinel,
      mergeDomains: s.mergeDomains,
      denyNoteMax: s.denyNoteMax,
      tls: s.tls,
      keyPrefix: s.keyPrefix,
    }).toEqual({
      configDir: "config",
      port: 8081,
      host: "0.0.0.0",
      adminPort: 8080,
      adminHost: "127.0.0.1",
      logLevel: "info",
      logFormat: "json",
      redisUrls: [],
      redisCluster: [],
      redisSentinel: undefined,
      mergeDomains: false,
      denyNoteMax: 10_000,
      tls: undefined,
      keyPrefix: "",
    });
    expect(s.redisAuth).toEqual({});
    expect({
      referenceHttp: s.referenceHttp,
      referenceDebug: s.referenceDebug,
      prometheus: s.prometheus,
      globalShadowMode: s.globalShadowMode,
      globalQuotaMode: s.globalQuotaMode,
      healthCheck: s.healthCheck,
      forceStartWithoutRules: s.forceStartWithoutRules,
      maxConnectionAge: s.maxConnectionAge,
      metricLabels: s.metricLabels,
      runtimeLayout: s.runtimeLayout,
      referenceNotes: s.referenceNotes,
      responseHeaders: s.responseHeaders,
    }).toEqual({
      referenceHttp: undefined,
      referenceDebug: undefined,
      prometheus: undefined,
      globalShadowMode: false,
      globalQuotaMode: false,
      healthCheck: { atLeastOneDomain: false, storeConnected: false },
      forceStartWithoutRules: false,
      maxConnectionAge: undefined,
      metricLabels: {},
      runtimeLayout: undefined,
      referenceNotes: [],
      responseHeaders: { enabled: false, limit: "RateLimit-Limit", remaining: "RateLimit-Remaining", reset: "RateLimit-Reset" },
    });
  });

  it("every variable of the reference's list is read, and no other", () => {
    const { read } = readReferenceEnv({}, () => false);
    // STATSD_PROTOCOL is gostats' own (the reference's statsd sink reads it from the environment).
    expect([...read].sort()).toEqual([...referenceList().keys(), "STATSD_PROTOCOL"].sort());
  });

  it("every variable set to the reference's own default is accepted (USE_STATSD=true: statsd to localhost:8125 over TCP)", () => {
    const env = Object.fromEntries([...referenceList()].filter(([, v]) => v !== ""));
    env.PORT = "0";
    env.DEBUG_PORT = "0";
    const s = settings(env);
    expect(s.redisUrls).toEqual(["unix:///var/run/nutcracker/ratelimit.sock"]);
    expect(s.configDir).toBe("/srv/runtime_data/current/config");
    expect(s.logLevel).toBe("warn");
    expect(s.logFormat).toBe("text");
    expect(s.denyNoteMax).toBe(0);
    expect(s.statsd).toEqual({ host: "localhost", port: 8125, protocol: "tcp", flushMs: 10_000, tags: {} });
    // Set to the reference's defaults, nothing sluice does not use is worth a warning.
    expect(s.referenceNotes.filter((n) => n.differs)).toEqual([]);
    expect(s.referenceNotes.length).toBeGreaterThan(40);
  });
});

describe("precedence: flag > SLUICE_* > reference variable > default", () => {
  it("GRPC_PORT and GRPC_HOST", () => {
    expect([settings({ GRPC_PORT: "9000", GRPC_HOST: "10.0.0.5" }).port, settings({ GRPC_HOST: "10.0.0.5" }).host]).toEqual([9000, "10.0.0.5"]);
    expect(settings({ GRPC_PORT: "9000", SLUICE_PORT: "9100" }).port).toBe(9100);
    expect(settings({ GRPC_PORT: "9000", SLUICE_PORT: "9100" }, ["--port", "9200"]).port).toBe(9200);
    // An empty SLUICE_* counts as unset.
    expect(settings({ GRPC_PORT: "9000", SLUICE_PORT: "" }).port).toBe(9000);
  });

  it("a bad value names the variable", () => {
    expect(refusal({ GRPC_PORT: "grpc" })).toBe("GRPC_PORT=grpc (envoyproxy/ratelimit setting): must be an integer from 0 to 65535");
    expect(refusal({ SHADOW_MODE: "ture" })).toBe("SHADOW_MODE=ture (envoyproxy/ratelimit setting): must be true or false (or 1/0, t/f, yes/no, on/off)");
  });
});

describe("rule directory: RUNTIME_*", () => {
  it("RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY", () => {
    const s = settings({ RUNTIME_ROOT: "/srv/rt", RUNTIME_SUBDIRECTORY: "ratelimit" });
    expect([s.configDir, s.runtimeLayout]).toEqual(["/srv/rt/ratelimit/config", { dir: "/srv/rt/ratelimit/config", ignoreDotFiles: false }]);
    expect(settings({ RUNTIME_ROOT: "/srv/rt", RUNTIME_APPDIRECTORY: "rules" }).configDir).toBe("/srv/rt/rules");
    expect(settings({ RUNTIME_ROOT: "/srv/rt", RUNTIME_SUBDIRECTORY: "rl", RUNTIME_APPDIRECTORY: "" }).configDir).toBe("/srv/rt/rl");
    expect(settings({ RUNTIME_SUBDIRECTORY: "rl" }).configDir).toBe("/srv/runtime_data/current/rl/config");
    expect(settings({ RUNTIME_ROOT: "/srv/rt", RUNTIME_IGNOREDOTFILES: "true" }).runtimeLayout).toEqual({ dir: "/srv/rt/config", ignoreDotFiles: true });
  });

  it("--config wins; RUNTIME_WATCH_ROOT is noted; a bad boolean is refused", () => {
    const s = settings({ RUNTIME_ROOT: "/srv/rt", RUNTIME_WATCH_ROOT: "false" }, ["--config", "rules"]);
    expect([s.configDir, s.runtimeLayout, notes(s)]).toEqual(["rules", undefined, ["RUNTIME_WATCH_ROOT*", "RUNTIME_ROOT*"]]);
    expect(refusal({ RUNTIME_IGNOREDOTFILES: "maybe" })).toBe(
      "RUNTIME_IGNOREDOTFILES=maybe (envoyproxy/ratelimit setting): must be true or false (or 1/0, t/f, yes/no, on/off)",
    );
  });

  it("CONFIG_TYPE, MERGE_DOMAIN_CONFIG, FORCE_START_WITHOUT_INITIAL_CONFIG, HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", () => {
    expect(refusal({ CONFIG_TYPE: "file" })).toBe("CONFIG_TYPE=file (envoyproxy/ratelimit setting): must be FILE or GRPC_XDS_SOTW");
    const s = settings({
      CONFIG_TYPE: "FILE",
      MERGE_DOMAIN_CONFIG: "true",
      FORCE_START_WITHOUT_INITIAL_CONFIG: "1",
      HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: "T",
    });
    expect([s.mergeDomains, s.forceStartWithoutRules, s.healthCheck]).toEqual([true, true, { atLeastOneDomain: true, storeConnected: false }]);
    expect(settings({ MERGE_DOMAIN_CONFIG: "true", SLUICE_MERGE_DOMAINS: "0" }).mergeDomains).toBe(false);
    expect(notes(settings({ CONFIG_GRPC_XDS_SERVER_URL: "xds:18000" }))).toEqual(["CONFIG_GRPC_XDS_SERVER_URL*"]);
  });
});

describe("rules from xDS: CONFIG_TYPE=GRPC_XDS_SOTW and CONFIG_GRPC_XDS_*", () => {
  it("the reference's defaults: localhost:18000, node id default, plaintext, its backoff; no rule directory", () => {
    const s = settings({ CONFIG_TYPE: "GRPC_XDS_SOTW" });
    expect(s.configXds).toEqual({
      target: "localhost:18000",
      nodeId: "default",
      nodeMetadata: {},
      headers: {},
      connectTimeoutMs: 10_000,
      connectRetryMs: 3000,
      backoff: { initialMs: 10_000, maxMs: 60_000, factor: 0.5, jitter: true },
      maxMessageBytes: 4 << 20,
    });
    expect(s.runtimeLayout).toBeUndefined();
  });

  it("every CONFIG_GRPC_XDS_* and XDS_CLIENT_* variable as the reference reads it", () => {
    const s = settings({
      CONFIG_TYPE: "GRPC_XDS_SOTW",
      CONFIG_GRPC_XDS_SERVER_URL: "envoy-gateway:18001",
      CONFIG_GRPC_XDS_NODE_ID: "envoy-ratelimit",
      CONFIG_GRPC_XDS_NODE_METADATA: "zone=a,bad,team=edge=x",
      CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: "x-tenant:blue,authorization:Bearer t",
      CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: "500ms",
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: "1s",
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: "1m",
      XDS_CLIENT_BACKOFF_RANDOM_FACTOR: "1.5",
      XDS_CLIENT_BACKOFF_JITTER: "false",
      XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: "1048576",
      RUNTIME_ROOT: "/data",
    });
    expect(s.configXds).toEqual({
      target: "envoy-gateway:18001",
      nodeId: "envoy-ratelimit",
      nodeMetadata: { zone: "a", team: "edge=x" },
      headers: { "x-tenant": "blue", authorization: "Bearer t" },
      connectTimeoutMs: 10_000,
      connectRetryMs: 500,
      backoff: { initialMs: 1000, maxMs: 60_000, factor: 1.5, jitter: false },
      maxMessageBytes: 1 << 20,
    });
    expect(notes(s)).toEqual(["RUNTIME_ROOT*"]);
  });

  it("CONFIG_GRPC_XDS_SERVER_USE_TLS and its files -> SLUICE_XDS_TLS*; sluice's own win", () => {
    const certs = certFactory();
    const ca = certs.ca("ca");
    const pod = certs.issue(ca, "tls", "client");
    const dir = certs.dir;
    fs.copyFileSync(ca.cert, path.join(dir, "ca.crt"));
    fs.copyFileSync(pod.cert, path.join(dir, "tls.crt"));
    fs.copyFileSync(pod.key, path.join(dir, "tls.key"));
    const tlsEnv = {
      CONFIG_TYPE: "GRPC_XDS_SOTW",
      CONFIG_GRPC_XDS_SERVER_USE_TLS: "true",
      CONFIG_GRPC_XDS_SERVER_TLS_CACERT: path.join(dir, "ca.crt"),
      CONFIG_GRPC_XDS_CLIENT_TLS_CERT: path.join(dir, "tls.crt"),
      CONFIG_GRPC_XDS_CLIENT_TLS_KEY: path.join(dir, "tls.key"),
      CONFIG_GRPC_XDS_SERVER_TLS_SAN: "envoy-gateway",
    };
    expect(settings(tlsEnv).configXds?.tls).toEqual({
      caFile: path.join(dir, "ca.crt"),
      certFile: path.join(dir, "tls.crt"),
      keyFile: path.join(dir, "tls.key"),
      serverName: "envoy-gateway",
    });
    expect(settings({ ...tlsEnv, SLUICE_XDS_TLS: "true" }).configXds?.tls).toEqual({
      caFile: undefined,
      certFile: undefined,
      keyFile: undefined,
      serverName: undefined,
    });
    expect(notes(settings({ CONFIG_TYPE: "GRPC_XDS_SOTW", CONFIG_GRPC_XDS_SERVER_TLS_CACERT: "/ca.crt" }))).toEqual(["CONFIG_GRPC_XDS_SERVER_TLS_CACERT*"]);
    expect(refusal({ ...tlsEnv, CONFIG_GRPC_XDS_CLIENT_TLS_KEY: "" })).toBe(
      `CONFIG_GRPC_XDS_CLIENT_TLS_CERT=${path.join(dir, "tls.crt")} (envoyproxy/ratelimit setting): CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together`,
    );
    expect(refusal({ ...tlsEnv, CONFIG_GRPC_XDS_SERVER_TLS_CACERT: path.join(dir, "missing.crt") })).toMatch(/^TLS to the xDS server: ENOENT/);
  });

  it("sluice's own --config-xds wins over the URL and takes the tuning variables; a rule directory beside it is refused", () => {
    const s = settings({ CONFIG_TYPE: "GRPC_XDS_SOTW", CONFIG_GRPC_XDS_SERVER_URL: "a:1", XDS_CLIENT_BACKOFF_JITTER: "f" }, ["--config-xds", "cp:18000"]);
    expect([s.configXds?.target, s.configXds?.backoff.jitter, notes(s)]).toEqual(["cp:18000", false, ["CONFIG_GRPC_XDS_SERVER_URL*"]]);
    // Without any reference variable: sluice's own defaults.
    expect(settings({}, ["--config-xds", "cp:18000"]).configXds?.backoff).toEqual({ initialMs: 1000, maxMs: 30_000, factor: 2, jitter: true });
    expect(settings({ XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: "2s" }, ["--config-xds", "cp:18000"]).configXds?.backoff.initialMs).toBe(2000);
    expect(notes(settings({ XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: "2s" }))).toEqual(["XDS_CLIENT_BACKOFF_INITIAL_INTERVAL*"]);
    expect(refusal({}, ["--config-xds", "cp:18000", "--config", "rules"])).toMatch(
      /^--config \(or SLUICE_CONFIG, RUNTIME_ROOT\) and --config-xds .* cannot be used together/,
    );
    expect(refusal({}, ["--config-xds", "not a target"])).toBe(
      "--config-xds takes the control plane's host:port (or a gRPC target like dns:///host:port), got 'not a target'",
    );
    expect(refusal({ SLUICE_XDS_NODE_ID: "n" })).toBe("SLUICE_XDS_NODE_ID needs --config-xds (or SLUICE_CONFIG_XDS)");
    expect(refusal({ SLUICE_XDS_TLS_CA: "/ca" }, ["--config-xds", "cp:1"])).toBe("SLUICE_XDS_TLS_CA needs SLUICE_XDS_TLS=true");
  });

  it("refusals name the variable", () => {
    const xds = { CONFIG_TYPE: "GRPC_XDS_SOTW" };
    expect(refusal({ ...xds, CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: "x-a" })).toBe(
      "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS=x-a (envoyproxy/ratelimit setting): takes name:value,name:value",
    );
    expect(refusal({ ...xds, CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: "grpc-timeout:1" })).toMatch(
      /^CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS=grpc-timeout:1 .*'grpc-timeout' cannot be a gRPC metadata name/,
    );
    expect(refusal({ ...xds, XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: "10" })).toBe(
      "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL=10 (envoyproxy/ratelimit setting): must be a duration like 300ms, 10s, 1h30m",
    );
    expect(refusal({ ...xds, CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: "0" })).toBe(
      "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL=0 (envoyproxy/ratelimit setting): must be at least 10ms",
    );
    expect(refusal({ ...xds, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: "-1" })).toBe(
      "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES=-1 (envoyproxy/ratelimit setting): must be an integer from 0 to 268435456",
    );
  });
});

describe("Redis: REDIS_*", () => {
  it("single over tcp (host:port or a redis:// URL), over a unix socket (the reference's default socket type)", () => {
    expect(settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "redis.internal:6380" }).redisUrls).toEqual(["redis://redis.internal:6380"]);
    expect(settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "redis://r:7379/2" }).redisUrls).toEqual(["redis://r:7379/2"]);
    expect(settings({ REDIS_URL: "/run/redis/redis.sock" }).redisUrls).toEqual(["unix:///run/redis/redis.sock"]);
    expect(settings({ REDIS_SOCKET_TYPE: "UNIX", REDIS_URL: "/run/my redis.sock" }).redisUrls).toEqual(["unix:///run/my%20redis.sock"]);
  });

  it("cluster and sentinel", () => {
    expect(settings({ REDIS_TYPE: "CLUSTER", REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "a:7000,b:7001" }).redisCluster).toEqual([
      { host: "a", port: 7000 },
      { host: "b", port: 7001 },
    ]);
    const s = settings({ REDIS_TYPE: "sentinel", REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "mymaster,s1:27379,[::1]:26380", REDIS_SENTINEL_AUTH: "spw" });
    expect(s.redisSentinel).toEqual({
      name: "mymaster",
      sentinels: [
        { host: "s1", port: 27379 },
        { host: "::1", port: 26380 },
      ],
    });
    expect([s.redisSentinelAuth.username, s.redisSentinelAuth.password?.reveal()]).toEqual([undefined, "spw"]);
    const own = settings({ REDIS_SENTINEL_AUTH: "admin:spw" }, ["--redis-sentinel", "m@s1:27379"]);
    expect([own.redisSentinelAuth.username, own.redisSentinelAuth.password?.reveal()]).toEqual(["admin", "spw"]);
    expect(notes(settings({ REDIS_SENTINEL_AUTH: "spw" }))).toEqual(["REDIS_SENTINEL_AUTH*"]);
    expect(refusal({ REDIS_TYPE: "sentinel", REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "s1:27379" })).toMatch(
      /^REDIS_URL=s1:27379 \(envoyproxy\/ratelimit setting\): REDIS_URL takes MASTERNAME,host:port/,
    );
  });

  it("REDIS_AUTH: password, or user:password; sluice's own credentials win", () => {
    const a = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:7379", REDIS_AUTH: "app:s3cr:et" }).redisAuth;
    expect([a.username, a.password?.reveal()]).toEqual(["app", "s3cr:et"]);
    const b = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:7379", REDIS_AUTH: "s3cret" }).redisAuth;
    expect([b.username, b.password?.reveal()]).toEqual([undefined, "s3cret"]);
    const own = settings({ REDIS_AUTH: "s3cret", SLUICE_REDIS_PASSWORD_FILE: "/run/pw" });
    expect([own.redisAuth.password, own.redisAuth.passwordFile, notes(own)]).toEqual([undefined, "/run/pw", ["REDIS_AUTH*"]]);
    // The password never shows in a note or an error.
    expect(JSON.stringify(own.referenceNotes)).not.toContain("s3cret");
  });

  it("REDIS_TLS with CA and client certificate", () => {
    const s = settings({
      REDIS_SOCKET_TYPE: "tcp",
      REDIS_URL: "r:6380",
      REDIS_TLS: "true",
      REDIS_TLS_CACERT: "/ca.pem",
      REDIS_TLS_CLIENT_CERT: "/c.pem",
      REDIS_TLS_CLIENT_KEY: "/k.pem",
    });
    expect([s.redisUrls, s.redisAuth.tlsCaFile, s.redisAuth.tlsCertFile, s.redisAuth.tlsKeyFile]).toEqual([["rediss://r:6380"], "/ca.pem", "/c.pem", "/k.pem"]);
    expect(settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "redis://r:6380", REDIS_TLS: "true" }).redisUrls).toEqual(["rediss://r:6380"]);
    const off = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:6380", REDIS_TLS_CACERT: "/ca.pem" });
    expect([off.redisUrls, off.redisAuth.tlsCaFile, notes(off)]).toEqual([["redis://r:6380"], undefined, ["REDIS_TLS_CACERT*"]]);
  });

  it("sluice's own store wins over REDIS_URL", () => {
    const s = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:7379", REDIS_TYPE: "cluster" }, ["--redis", "redis://mine:7379"]);
    expect([s.redisUrls, s.redisCluster, notes(s)]).toEqual([["redis://mine:7379"], [], ["REDIS_URL*", "REDIS_SOCKET_TYPE*", "REDIS_TYPE*"]]);
  });

  it("what sluice cannot honour is refused, naming the variable", () => {
    const cases: [Record<string, string>, string][] = [
      [{ REDIS_TYPE: "ring" }, "REDIS_TYPE=ring (envoyproxy/ratelimit setting): must be SINGLE, CLUSTER or SENTINEL"],
      [{ REDIS_SOCKET_TYPE: "udp", REDIS_URL: "r:1" }, "REDIS_SOCKET_TYPE=udp (envoyproxy/ratelimit setting): must be tcp or unix"],
      [
        { REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "redis-host" },
        "REDIS_URL=redis-host (envoyproxy/ratelimit setting): with REDIS_SOCKET_TYPE=tcp takes host:port (or redis://host:port)",
      ],
      [
        { REDIS_TYPE: "cluster", REDIS_URL: "a:1" },
        "REDIS_TYPE=cluster (envoyproxy/ratelimit setting): needs REDIS_SOCKET_TYPE=tcp (the reference's default is unix): REDIS_URL then lists host:port addresses",
      ],
      [
        { REDIS_TYPE: "sentinel", REDIS_SOCKET_TYPE: "unix", REDIS_URL: "m,s:1" },
        "REDIS_TYPE=sentinel (envoyproxy/ratelimit setting): needs REDIS_SOCKET_TYPE=tcp: REDIS_URL then lists host:port addresses",
      ],
      [
        { REDIS_TYPE: "cluster", REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "a:1", REDIS_TLS: "true" },
        "REDIS_TLS=true (envoyproxy/ratelimit setting): sluice's Redis Cluster store connects without TLS",
      ],
      [{ REDIS_URL: "/r.sock", REDIS_TLS: "true" }, "REDIS_TLS=true (envoyproxy/ratelimit setting): sluice does not speak TLS over a unix socket"],
      [
        { BACKEND_TYPE: "memcache" },
        "BACKEND_TYPE=memcache (envoyproxy/ratelimit setting): sluice has no memcached store: use Redis (BACKEND_TYPE=redis and REDIS_URL)",
      ],
      [
        { REDIS_PERSECOND: "true" },
        "REDIS_PERSECOND=true (envoyproxy/ratelimit setting): needs the main Redis too: set REDIS_URL (or sluice's --redis, --redis-cluster or --redis-sentinel); sluice has no default Redis",
      ],
      [
        { REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: "true" },
        "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION=true (envoyproxy/ratelimit setting): sluice always checks the Redis server's name: give REDIS_URL the name its certificate carries",
      ],
      [{ REDIS_POOL_SIZE: "many" }, "REDIS_POOL_SIZE=many (envoyproxy/ratelimit setting): must be an integer from 0 to 1000000"],
      [{ REDIS_TIMEOUT: "10" }, "REDIS_TIMEOUT=10 (envoyproxy/ratelimit setting): must be a duration like 300ms, 10s, 1h30m"],
    ];
    for (const [env, message] of cases) expect(refusal(env)).toBe(message);
  });

  it("REDIS_PERSECOND=true: the per-second store from REDIS_PERSECOND_* (the reference's defaults where unset)", () => {
    const main = { REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:7379" };
    const byDefault = settings({ ...main, REDIS_PERSECOND: "true" });
    expect([byDefault.redisUrls, byDefault.redisPerSecond]).toEqual([
      ["redis://r:7379"],
      { urls: ["unix:///var/run/nutcracker/ratelimitpersecond.sock"], cluster: [], sentinel: undefined, auth: {}, sentinelAuth: {} },
    ]);
    const tcp = settings({
      ...main,
      REDIS_PERSECOND: "1",
      REDIS_PERSECOND_SOCKET_TYPE: "tcp",
      REDIS_PERSECOND_URL: "ps:6380",
      REDIS_PERSECOND_AUTH: "psuser:ps:pw",
    });
    expect([tcp.redisPerSecond?.urls, tcp.redisPerSecond?.auth.username, tcp.redisPerSecond?.auth.password?.reveal(), tcp.redisAuth]).toEqual([
      ["redis://ps:6380"],
      "psuser",
      "ps:pw",
      {},
    ]);
    const cluster = settings({
      ...main,
      REDIS_PERSECOND: "true",
      REDIS_PERSECOND_TYPE: "cluster",
      REDIS_PERSECOND_SOCKET_TYPE: "tcp",
      REDIS_PERSECOND_URL: "c1:7000,c2:7001",
    });
    expect(cluster.redisPerSecond?.cluster).toEqual([
      { host: "c1", port: 7000 },
      { host: "c2", port: 7001 },
    ]);
    const sentinel = settings({
      ...main,
      REDIS_PERSECOND: "true",
      REDIS_PERSECOND_TYPE: "SENTINEL",
      REDIS_PERSECOND_SOCKET_TYPE: "tcp",
      REDIS_PERSECOND_URL: "psmaster,s1:27379",
      REDIS_PERSECOND_SENTINEL_AUTH: "sadmin:spw",
      REDIS_SENTINEL_AUTH: "main-spw",
    });
    const ps = sentinel.redisPerSecond!;
    expect([ps.sentinel, ps.sentinelAuth.username, ps.sentinelAuth.password?.reveal(), sentinel.redisSentinelAuth, notes(sentinel)]).toEqual([
      { name: "psmaster", sentinels: [{ host: "s1", port: 27379 }] },
      "sadmin",
      "spw",
      {},
      ["REDIS_SENTINEL_AUTH*"],
    ]);
  });

  it("REDIS_PERSECOND_TLS takes the shared TLS files; REDIS_TLS alone keeps them for the main store", () => {
    const files = { REDIS_TLS_CACERT: "/ca.pem", REDIS_TLS_CLIENT_CERT: "/c.pem", REDIS_TLS_CLIENT_KEY: "/k.pem" };
    const base = {
      REDIS_SOCKET_TYPE: "tcp",
      REDIS_URL: "r:7379",
      REDIS_PERSECOND: "true",
      REDIS_PERSECOND_SOCKET_TYPE: "tcp",
      REDIS_PERSECOND_URL: "ps:6380",
      ...files,
    };
    const psOnly = settings({ ...base, REDIS_PERSECOND_TLS: "true" });
    const a = psOnly.redisPerSecond!.auth;
    expect([psOnly.redisUrls, psOnly.redisAuth, psOnly.redisPerSecond!.urls, a.tlsCaFile, a.tlsCertFile, a.tlsKeyFile, notes(psOnly)]).toEqual([
      ["redis://r:7379"],
      {},
      ["rediss://ps:6380"],
      "/ca.pem",
      "/c.pem",
      "/k.pem",
      [],
    ]);
    const mainOnly = settings({ ...base, REDIS_TLS: "true" });
    expect([mainOnly.redisUrls, mainOnly.redisAuth.tlsCaFile, mainOnly.redisPerSecond!.urls, mainOnly.redisPerSecond!.auth.tlsCaFile]).toEqual([
      ["rediss://r:7379"],
      "/ca.pem",
      ["redis://ps:6380"],
      undefined,
    ]);
    const neither = settings({ ...base });
    expect(notes(neither)).toEqual(["REDIS_TLS_CACERT*", "REDIS_TLS_CLIENT_CERT*", "REDIS_TLS_CLIENT_KEY*"]);
  });

  it("sluice's own per-second store and credentials win over REDIS_PERSECOND_*", () => {
    const s = settings(
      {
        REDIS_SOCKET_TYPE: "tcp",
        REDIS_URL: "r:7379",
        REDIS_PERSECOND: "true",
        REDIS_PERSECOND_URL: "ps:6380",
        REDIS_PERSECOND_TLS: "true",
        REDIS_PERSECOND_AUTH: "pw",
        SLUICE_REDIS_PER_SECOND_PASSWORD: "mine",
      },
      ["--redis-per-second", "redis://own:6381"],
    );
    expect([s.redisPerSecond?.urls, s.redisPerSecond?.auth.password?.reveal(), notes(s)]).toEqual([
      ["redis://own:6381"],
      "mine",
      ["REDIS_PERSECOND_URL*", "REDIS_PERSECOND_TLS*", "REDIS_PERSECOND_AUTH*"],
    ]);
    // Without REDIS_PERSECOND=true its variables are noted, never used.
    const off = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:7379", REDIS_PERSECOND_URL: "ps:6380", REDIS_PERSECOND_AUTH: "pw" });
    expect([off.redisPerSecond, notes(off)]).toEqual([undefined, ["REDIS_PERSECOND_URL*", "REDIS_PERSECOND_AUTH*"]]);
  });

  it("REDIS_PERSECOND_* values sluice cannot honour are refused, naming the variable", () => {
    const on = { REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:7379", REDIS_PERSECOND: "true" };
    const cases: [Record<string, string>, string][] = [
      [{ ...on, REDIS_PERSECOND_TYPE: "ring" }, "REDIS_PERSECOND_TYPE=ring (envoyproxy/ratelimit setting): must be SINGLE, CLUSTER or SENTINEL"],
      [{ ...on, REDIS_PERSECOND_SOCKET_TYPE: "udp" }, "REDIS_PERSECOND_SOCKET_TYPE=udp (envoyproxy/ratelimit setting): must be tcp or unix"],
      [
        { ...on, REDIS_PERSECOND_SOCKET_TYPE: "tcp", REDIS_PERSECOND_URL: "ps" },
        "REDIS_PERSECOND_URL=ps (envoyproxy/ratelimit setting): with REDIS_PERSECOND_SOCKET_TYPE=tcp takes host:port (or redis://host:port)",
      ],
      [
        { ...on, REDIS_PERSECOND_TYPE: "cluster", REDIS_PERSECOND_URL: "a:1" },
        "REDIS_PERSECOND_TYPE=cluster (envoyproxy/ratelimit setting): needs REDIS_PERSECOND_SOCKET_TYPE=tcp (the reference's default is unix): REDIS_PERSECOND_URL then lists host:port addresses",
      ],
      [{ ...on, REDIS_PERSECOND_TLS: "true" }, "REDIS_PERSECOND_TLS=true (envoyproxy/ratelimit setting): sluice does not speak TLS over a unix socket"],
      [
        { ...on, REDIS_PERSECOND_TYPE: "sentinel", REDIS_PERSECOND_SOCKET_TYPE: "tcp", REDIS_PERSECOND_URL: "s1:27379" },
        "REDIS_PERSECOND_URL=s1:27379 (envoyproxy/ratelimit setting): REDIS_PERSECOND_URL takes MASTERNAME,host:port[,host:port...]: no sentinel given",
      ],
      [{ ...on, REDIS_PERSECOND_POOL_SIZE: "many" }, "REDIS_PERSECOND_POOL_SIZE=many (envoyproxy/ratelimit setting): must be an integer from 0 to 1000000"],
      [{ ...on, REDIS_PERSECOND_TIMEOUT: "5" }, "REDIS_PERSECOND_TIMEOUT=5 (envoyproxy/ratelimit setting): must be a duration like 300ms, 10s, 1h30m"],
      [
        { ...on, REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR: "drop" },
        "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR=drop (envoyproxy/ratelimit setting): must be WAIT, CREATE or ERROR",
      ],
    ];
    for (const [env, message] of cases) expect(refusal(env)).toBe(message);
    // The password never shows in an error.
    expect(refusal({ REDIS_PERSECOND: "true", REDIS_PERSECOND_AUTH: "s3cret" })).not.toContain("s3cret");
  });

  it("pool and pipeline knobs are noted (a warning when they differ from the reference's default)", () => {
    const s = settings({ REDIS_POOL_SIZE: "10", REDIS_TIMEOUT: "2s", REDIS_PERSECOND_URL: "/x.sock", MEMCACHE_HOST_PORT: "m:11211" });
    expect(notes(s)).toEqual(["MEMCACHE_HOST_PORT*", "REDIS_PERSECOND_URL*", "REDIS_POOL_SIZE", "REDIS_TIMEOUT*"]);
    expect(settings({ REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: "true" }).healthCheck).toEqual({ atLeastOneDomain: false, storeConnected: true });
  });
});

describe("listeners: GRPC_*, HOST/PORT, DEBUG_*", () => {
  it("the reference's HTTP and debug ports open only when their variables are set", () => {
    const s = settings({ PORT: "8080", DEBUG_HOST: "127.0.0.1", SLUICE_ADMIN_PORT: "9901" });
    expect([s.referenceHttp, s.referenceDebug]).toEqual([
      { host: "0.0.0.0", port: 8080 },
      { host: "127.0.0.1", port: 6070 },
    ]);
    expect(settings({ HOST: "127.0.0.1" }, ["--admin-port", "0"]).referenceHttp).toEqual({ host: "127.0.0.1", port: 8080 });
  });

  it("a port clash is named before binding", () => {
    expect(refusal({ PORT: "8080" })).toBe(
      "sluice's admin port (--admin-port or SLUICE_ADMIN_PORT) and PORT (the reference's HTTP port: /healthcheck, /json) both use port 8080: give one of them another port",
    );
    expect(refusal({ DEBUG_PORT: "8081" })).toBe(
      "the gRPC port (GRPC_PORT, --port or SLUICE_PORT) and DEBUG_PORT (the reference's debug port: /rlconfig, /stats) both use port 8081: give one of them another port",
    );
    expect(refusal({ PORT: "9000", SLUICE_PORT: "9000" })).toBe(
      "the gRPC port (SLUICE_PORT or --port) and PORT (the reference's HTTP port: /healthcheck, /json) both use port 9000: give one of them another port",
    );
    // Different addresses on one port are fine.
    expect(settings({ PORT: "8080", HOST: "10.0.0.5" }).referenceHttp).toEqual({ host: "10.0.0.5", port: 8080 });
  });

  it("GRPC_UDS and connection age", () => {
    expect(refusal({ GRPC_UDS: "/tmp/rl.sock" })).toBe(
      "GRPC_UDS=/tmp/rl.sock (envoyproxy/ratelimit setting): sluice serves gRPC on TCP only: unset GRPC_UDS and give GRPC_PORT (and GRPC_HOST)",
    );
    expect(settings({ GRPC_MAX_CONNECTION_AGE: "1440m", GRPC_MAX_CONNECTION_AGE_GRACE: "3600s" }).maxConnectionAge).toEqual({
      ageMs: 86_400_000,
      graceMs: 3_600_000,
    });
    // Either one given: the other takes the reference's default.
    expect(settings({ GRPC_MAX_CONNECTION_AGE: "12h" }).maxConnectionAge).toEqual({ ageMs: 43_200_000, graceMs: 3_600_000 });
    expect(settings({ GRPC_MAX_CONNECTION_AGE_GRACE: "5m" }).maxConnectionAge).toEqual({ ageMs: 86_400_000, graceMs: 300_000 });
    // sluice's own setting wins.
    expect(settings({ GRPC_MAX_CONNECTION_AGE: "12h", SLUICE_MAX_CONNECTION_AGE_MS: "60000" }).maxConnectionAge).toEqual({ ageMs: 60_000, graceMs: 3_600_000 });
    expect(refusal({ GRPC_MAX_CONNECTION_AGE: "soon" })).toMatch(/^GRPC_MAX_CONNECTION_AGE=soon \(envoyproxy\/ratelimit setting\): /);
  });

  it("gRPC TLS maps to --tls-*; SAN checks are refused; files without GRPC_SERVER_USE_TLS are noted", () => {
    const env = { GRPC_SERVER_USE_TLS: "true", GRPC_SERVER_TLS_CERT: "/c.pem", GRPC_SERVER_TLS_KEY: "/k.pem", GRPC_CLIENT_TLS_CACERT: "/ca.pem" };
    expect(settings(env).tls).toEqual({ certFile: "/c.pem", keyFile: "/k.pem", caFile: "/ca.pem", reloadMs: 5000 });
    expect(settings(env, ["--tls-cert", "mine.pem", "--tls-key", "mine.key"]).tls).toEqual({
      certFile: "mine.pem",
      keyFile: "mine.key",
      caFile: undefined,
      reloadMs: 5000,
    });
    expect(refusal({ GRPC_SERVER_USE_TLS: "true", GRPC_SERVER_TLS_CERT: "/c.pem" })).toBe(
      "GRPC_SERVER_USE_TLS=true (envoyproxy/ratelimit setting): needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY",
    );
    expect(refusal({ ...env, GRPC_CLIENT_TLS_SAN: "envoy.internal" })).toMatch(
      /^GRPC_CLIENT_TLS_SAN=envoy.internal \(envoyproxy\/ratelimit setting\): sluice does not check the name in client certificates/,
    );
    const off = settings({ GRPC_SERVER_TLS_CERT: "/c.pem" });
    expect([off.tls, notes(off)]).toEqual([undefined, ["GRPC_SERVER_TLS_CERT*"]]);
  });
});

describe("the reference's environment: its ports, failure semantics and keys by default", () => {
  // A Deployment written for the reference, with no PORT.
  const REFERENCE = {
    REDIS_SOCKET_TYPE: "tcp",
    REDIS_URL: "redis:6380",
    RUNTIME_ROOT: "/data",
    RUNTIME_SUBDIRECTORY: "rl",
    USE_STATSD: "false",
    LOG_LEVEL: "info",
  };

  it("opens the reference's HTTP and debug ports at their defaults, and sluice's admin port apart on loopback:8082", () => {
    const s = settings(REFERENCE);
    expect([s.referenceLayout, s.referenceHttp, s.referenceDebug, s.adminHost, s.adminPort, s.port]).toEqual([
      true,
      { host: "0.0.0.0", port: 8080 },
      { host: "0.0.0.0", port: 6070 },
      "127.0.0.1",
      8082,
      8081,
    ]);
    expect([s.failureMode, s.referenceKeys]).toEqual(["error", { countsRefused: true }]);
    expect(s.listenSettings).toEqual({
      grpc: { what: "the gRPC port", port: "GRPC_PORT, --port or SLUICE_PORT", host: "GRPC_HOST, --host or SLUICE_HOST" },
      admin: { what: "sluice's admin port", port: "--admin-port or SLUICE_ADMIN_PORT", host: "--admin-host or SLUICE_ADMIN_HOST" },
    });
    // Their own ports, as a second instance on one host would have them.
    const second = settings({ ...REFERENCE, GRPC_PORT: "18081", PORT: "18080", DEBUG_PORT: "16070", SLUICE_ADMIN_PORT: "18082" });
    expect([second.port, second.referenceHttp?.port, second.referenceDebug?.port, second.adminPort]).toEqual([18081, 18080, 16070, 18082]);
    // The admin port's default clashing with PORT is named like any clash.
    expect(refusal({ ...REFERENCE, PORT: "8082" })).toBe(
      "sluice's admin port (--admin-port or SLUICE_ADMIN_PORT) and PORT (the reference's HTTP port: /healthcheck, /json) both use port 8082: give one of them another port",
    );
  });

  it("sluice's own settings win: --admin-port moves its port, SLUICE_FAILURE_MODE and SLUICE_REFERENCE_KEYS choose", () => {
    const s = settings({ ...REFERENCE, SLUICE_FAILURE_MODE: "allow", SLUICE_REFERENCE_KEYS: "false" }, ["--admin-port", "9901"]);
    expect([s.adminPort, s.failureMode, s.referenceKeys]).toEqual([9901, "allow", undefined]);
    expect([s.listenSettings.admin.port, s.listenSettings.grpc.port]).toEqual(["--admin-port", "GRPC_PORT, --port or SLUICE_PORT"]);
    expect(settings(REFERENCE, ["--failure-mode", "deny"]).failureMode).toBe("deny");
    const own = settings({ ...REFERENCE, SLUICE_ADMIN_PORT: "9902", SLUICE_PORT: "9903" });
    expect([own.adminPort, own.listenSettings.admin.port, own.listenSettings.grpc.port]).toEqual([
      9902,
      "SLUICE_ADMIN_PORT or --admin-port",
      "SLUICE_PORT or --port",
    ]);
  });

  it("generic names alone (PORT, HOST, LOG_LEVEL, LOG_FORMAT) keep sluice's defaults", () => {
    const s = settings({ PORT: "9000", LOG_LEVEL: "info", LOG_FORMAT: "json" });
    expect([s.referenceLayout, s.referenceHttp, s.referenceDebug, s.adminPort, s.failureMode, s.referenceKeys]).toEqual([
      false,
      { host: "0.0.0.0", port: 9000 },
      undefined,
      8080,
      "allow",
      undefined,
    ]);
    expect(s.listenSettings.grpc.port).toBe("--port or SLUICE_PORT");
  });

  it("reference keys need one Redis node: refused when asked for on a cluster, off (noted) by default there", () => {
    expect(refusal({ SLUICE_REDIS_CLUSTER: "10.0.0.1:7000", SLUICE_REFERENCE_KEYS: "true" })).toBe(
      "SLUICE_REFERENCE_KEYS needs one Redis node per store (--redis with one URL, or --redis-sentinel): not a cluster or shards",
    );
    const s = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_TYPE: "cluster", REDIS_URL: "10.0.0.1:7000" });
    expect([s.referenceKeys, notes(s).includes("REDIS_TYPE*")]).toEqual([undefined, true]);
    expect(settings({ REDIS_URL: "/tmp/r.sock", STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: "true" }).referenceKeys).toEqual({ countsRefused: false });
    expect(refusal({ SLUICE_FAILURE_MODE: "open" })).toBe("SLUICE_FAILURE_MODE must be one of allow, deny, local, error, got 'open'");
  });
});

describe("logs, stats, tracing, local cache", () => {
  it("LOG_LEVEL (logrus names) and LOG_FORMAT", () => {
    const levels = ["WARN", "warning", "panic", "Debug", "trace"].map((l) => settings({ LOG_LEVEL: l }).logLevel);
    expect(levels).toEqual(["warn", "warn", "fatal", "debug", "trace"]);
    expect(settings({ LOG_LEVEL: "debug", SLUICE_LOG_LEVEL: "error" }).logLevel).toBe("error");
    expect([settings({ LOG_FORMAT: "text" }).logFormat, settings({ LOG_FORMAT: "JSON" }).logFormat]).toEqual(["text", "json"]);
    expect(settings({ LOG_FORMAT: "text", SLUICE_LOG_FORMAT: "json" }).logFormat).toBe("json");
    expect(refusal({ LOG_LEVEL: "loud" })).toBe("LOG_LEVEL=loud (envoyproxy/ratelimit setting): must be one of panic, fatal, error, warn, info, debug, trace");
    expect(refusal({ LOG_FORMAT: "logfmt" })).toBe("LOG_FORMAT=logfmt (envoyproxy/ratelimit setting): must be json or text");
  });

  it("LOCAL_CACHE_SIZE_IN_BYTES: 0 turns the deny note off, else bytes / 256 notes", () => {
    const notesFor = (bytes: string) => settings({ LOCAL_CACHE_SIZE_IN_BYTES: bytes }).denyNoteMax;
    expect(["0", "1048576", "100", "1000000000000"].map(notesFor)).toEqual([0, 4096, 1, 10_000_000]);
    expect(settings({ LOCAL_CACHE_SIZE_IN_BYTES: "0", SLUICE_DENY_NOTE_MAX: "50" }).denyNoteMax).toBe(50);
  });

  it("NEAR_LIMIT_RATIO is SLUICE_NEAR_LIMIT_RATIO's twin (above 0, at most 1)", () => {
    expect(settings({}).nearLimitRatio).toBe(0.8);
    expect([settings({ NEAR_LIMIT_RATIO: "0.80" }).referenceNotes, settings({ NEAR_LIMIT_RATIO: "0.9" }).nearLimitRatio]).toEqual([[], 0.9]);
    expect(settings({ NEAR_LIMIT_RATIO: "5e-1" }).nearLimitRatio).toBe(0.5);
    expect(settings({ NEAR_LIMIT_RATIO: "0.9", SLUICE_NEAR_LIMIT_RATIO: "0.75" }).nearLimitRatio).toBe(0.75);
    expect(refusal({ NEAR_LIMIT_RATIO: "1.5" })).toBe(
      "NEAR_LIMIT_RATIO=1.5 (envoyproxy/ratelimit setting): must be above 0 and at most 1 (a share of each limit)",
    );
    expect(refusal({ NEAR_LIMIT_RATIO: "0" })).toBe("NEAR_LIMIT_RATIO=0 (envoyproxy/ratelimit setting): must be above 0 and at most 1 (a share of each limit)");
    expect(refusal({ SLUICE_NEAR_LIMIT_RATIO: "80%" })).toBe("SLUICE_NEAR_LIMIT_RATIO must be a number above 0 and at most 1, got '80%'");
  });

  it("TRACING_*: TRACING_ENABLED=true turns on OTLP tracing with the reference's service name, protocol and rate; sluice's own settings win", () => {
    expect(settings({}).tracing).toBeUndefined();
    expect(notes(settings({ TRACING_SERVICE_NAME: "rl", TRACING_SAMPLING_RATE: "1" }))).toEqual(["TRACING_SERVICE_NAME*", "TRACING_SAMPLING_RATE"]);
    const t = settings({ TRACING_ENABLED: "true", TRACING_SERVICE_NAMESPACE: "edge ns", TRACING_SERVICE_INSTANCE_ID: "pod-1", TRACING_SAMPLING_RATE: "0.25" })
      .tracing!;
    expect(t).toEqual({
      protocol: "http/protobuf",
      resource: { "service.name": "RateLimit", "service.namespace": "edge ns", "service.instance.id": "pod-1" },
      samplingRate: 0.25,
      maxQueueSize: 2048,
      maxExportBatchSize: 512,
      scheduledDelayMs: 5000,
      exportTimeoutMs: 10_000,
    });
    const g = settings({ TRACING_ENABLED: "true", TRACING_SERVICE_NAME: "rl", TRACING_EXPORTER_PROTOCOL: "grpc" }).tracing!;
    expect([g.protocol, g.resource["service.name"], g.samplingRate]).toEqual(["grpc", "rl", 1]);
    expect(g.resource["service.instance.id"]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // sluice's own names win: OTEL_SERVICE_NAME, OTEL_EXPORTER_OTLP_PROTOCOL, SLUICE_TRACING_SAMPLING_RATE, --tracing off
    const own = settings({
      TRACING_ENABLED: "true",
      TRACING_SERVICE_NAME: "rl",
      TRACING_EXPORTER_PROTOCOL: "grpc",
      TRACING_SAMPLING_RATE: "0.5",
      TRACING_SERVICE_NAMESPACE: "ns",
      OTEL_SERVICE_NAME: "mine",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      SLUICE_TRACING_SAMPLING_RATE: "0.1",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod",
    });
    expect([
      own.tracing!.resource["service.name"],
      own.tracing!.protocol,
      own.tracing!.samplingRate,
      own.tracing!.resource["deployment.environment"],
      own.tracing!.resource["service.namespace"],
    ]).toEqual(["mine", "http/json", 0.1, "prod", undefined]);
    expect(notes(own)).toEqual(["TRACING_SERVICE_NAMESPACE*"]);
    expect(settings({ TRACING_ENABLED: "true" }, ["--tracing", "off"]).tracing).toBeUndefined();
    expect(refusal({ TRACING_ENABLED: "true", TRACING_EXPORTER_PROTOCOL: "udp" })).toBe(
      "TRACING_EXPORTER_PROTOCOL=udp (envoyproxy/ratelimit setting): must be http or grpc",
    );
    expect(refusal({ TRACING_ENABLED: "true", TRACING_SAMPLING_RATE: "2" })).toBe(
      "TRACING_SAMPLING_RATE=2 (envoyproxy/ratelimit setting): must be from 0 to 1",
    );
  });

  it("--tracing / SLUICE_TRACING and the OTEL_* variables: checked at start with a message naming the setting", () => {
    expect(settings({}, ["--tracing", "otlp"]).tracing!.resource["service.name"]).toBe("sluice");
    expect(
      settings({ SLUICE_TRACING: "otlp", OTEL_BSP_SCHEDULE_DELAY: "50", OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "700", OTEL_EXPORTER_OTLP_TIMEOUT: "900" }).tracing,
    ).toMatchObject({ scheduledDelayMs: 50, exportTimeoutMs: 700 });
    expect(refusal({ SLUICE_TRACING: "jaeger" })).toBe("SLUICE_TRACING must be off or otlp, got 'jaeger'");
    expect(refusal({ SLUICE_TRACING: "otlp", OTEL_EXPORTER_OTLP_PROTOCOL: "thrift" })).toBe(
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL must be one of http/protobuf, http/json, grpc, got 'thrift'",
    );
    expect(refusal({ SLUICE_TRACING: "otlp", OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toBe(
      "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, got 'collector:4318'",
    );
    expect(refusal({ SLUICE_TRACING: "otlp", SLUICE_TRACING_SAMPLING_RATE: "1.5" })).toBe(
      "SLUICE_TRACING_SAMPLING_RATE must be a number from 0 to 1, got '1.5'",
    );
    expect(refusal({ SLUICE_TRACING: "otlp", OTEL_BSP_MAX_QUEUE_SIZE: "10", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "20" })).toBe(
      "OTEL_BSP_MAX_EXPORT_BATCH_SIZE (20) must not exceed OTEL_BSP_MAX_QUEUE_SIZE (10)",
    );
    expect(refusal({ SLUICE_TRACING: "otlp", OTEL_EXPORTER_OTLP_TIMEOUT: "0" })).toBe(
      "OTEL_EXPORTER_OTLP_TIMEOUT must be an integer from 1 to 600000, got '0'",
    );
    expect(refusal({ SLUICE_TRACING: "otlp", OTEL_RESOURCE_ATTRIBUTES: "team" })).toBe("OTEL_RESOURCE_ATTRIBUTES takes key=value[,key=value...], got 'team'");
    // Off: the OTEL_* variables are not looked at.
    expect(settings({ OTEL_EXPORTER_OTLP_PROTOCOL: "thrift" }).tracing).toBeUndefined();
  });

  it("StatsD: sent where the statsd variables ask for it, with the reference's defaults; sluice's own settings win", () => {
    expect(settings({}).statsd).toBeUndefined();
    expect(settings({ RUNTIME_ROOT: "/data", USE_PROMETHEUS: "true" }).statsd).toBeUndefined(); // no statsd variable: sluice's default
    expect(settings({ USE_STATSD: "true" }).statsd).toEqual({ host: "localhost", port: 8125, protocol: "tcp", flushMs: 10_000, tags: {} });
    expect(
      settings({
        STATSD_HOST: "statsd.local",
        STATSD_PORT: "9125",
        STATSD_PROTOCOL: "udp4",
        STATS_FLUSH_INTERVAL: "1m30s",
        EXTRA_TAGS: "env:prod,team:edge.one",
      }).statsd,
    ).toEqual({
      host: "statsd.local",
      port: 9125,
      protocol: "udp",
      flushMs: 90_000,
      tags: { env: "prod", team: "edge.one" },
    });
    expect(settings({ STATSD_HOST: "::1", USE_STATSD: "1" }).statsd).toEqual({ host: "::1", port: 8125, protocol: "tcp", flushMs: 10_000, tags: {} });
    expect(
      settings({
        STATSD_HOST: "statsd",
        SLUICE_STATSD: "127.0.0.1:8126",
        SLUICE_STATSD_PROTOCOL: "udp",
        SLUICE_STATSD_FLUSH_MS: "250",
        SLUICE_STATSD_TAGS: "a:b",
        EXTRA_TAGS: "env:prod",
      }).statsd,
    ).toEqual({
      host: "127.0.0.1",
      port: 8126,
      protocol: "udp",
      flushMs: 250,
      tags: { a: "b" },
    });
    expect(notes(settings({ USE_STATSD: "false", STATSD_HOST: "statsd", STATS_FLUSH_INTERVAL: "5s" }))).toEqual(["STATSD_HOST*", "STATS_FLUSH_INTERVAL*"]);
    expect(settings({ USE_STATSD: "false", STATSD_HOST: "statsd" }).statsd).toBeUndefined();
    const disabled = settings({ DISABLE_STATS: "true", USE_STATSD: "true", USE_PROMETHEUS: "true" });
    expect([disabled.prometheus, disabled.statsd, notes(disabled)]).toEqual([undefined, undefined, ["USE_STATSD", "USE_PROMETHEUS*"]]);
    expect(refusal({ USE_DOG_STATSD: "true", USE_STATSD: "false" })).toBe(
      "USE_DOG_STATSD=true (envoyproxy/ratelimit setting): sluice has no DogStatsD sink: set it to false and use USE_STATSD (plain statsd, the reference's names) or sluice's Prometheus metrics",
    );
    expect(refusal({ USE_STATSD: "true", STATSD_PORT: "0" })).toBe(
      "STATSD_PORT=0 (envoyproxy/ratelimit setting): must be a port from 1 to 65535 with USE_STATSD=true",
    );
    expect(refusal({ STATSD_PROTOCOL: "sctp" })).toBe(
      "STATSD_PROTOCOL=sctp (envoyproxy/ratelimit setting): must be tcp or udp (tcp4, tcp6, udp4, udp6 are taken as tcp and udp)",
    );
    expect(refusal({ USE_STATSD: "true", STATS_FLUSH_INTERVAL: "1ms" })).toBe(
      "STATS_FLUSH_INTERVAL=1ms (envoyproxy/ratelimit setting): must be at least 10ms with USE_STATSD=true",
    );
    expect(refusal({ STATSD_HOST: "a b" })).toBe("STATSD_HOST=a b (envoyproxy/ratelimit setting): must be a host name or an IP address");
  });

  it("SLUICE_STATSD settings: clear refusals", () => {
    expect(refusal({ SLUICE_STATSD: "statsd" })).toBe("SLUICE_STATSD must be host:port (e.g. localhost:8125, [::1]:8125), got 'statsd'");
    expect(refusal({ SLUICE_STATSD: "statsd:0" })).toBe("SLUICE_STATSD must be host:port (e.g. localhost:8125, [::1]:8125), got 'statsd:0'");
    expect(refusal({ SLUICE_STATSD: "s:1", SLUICE_STATSD_PROTOCOL: "uds" })).toBe("SLUICE_STATSD_PROTOCOL must be udp or tcp, got 'uds'");
    expect(refusal({ SLUICE_STATSD: "s:1", SLUICE_STATSD_FLUSH_MS: "5" })).toBe("SLUICE_STATSD_FLUSH_MS must be an integer from 10 to 3600000, got '5'");
    expect(refusal({ SLUICE_STATSD: "s:1", SLUICE_STATSD_TAGS: "env" })).toBe("SLUICE_STATSD_TAGS takes tag:value[,tag:value...], got 'env'");
    expect(refusal({ SLUICE_STATSD: "s:1", SLUICE_STATSD_TAGS: "a.b:c" })).toBe("SLUICE_STATSD_TAGS: tag 'a.b' may hold only letters, digits, '_' and '-'");
    expect(settings({ SLUICE_STATSD: "[::1]:8125" }).statsd).toEqual({ host: "::1", port: 8125, protocol: "udp", flushMs: 10_000, tags: {} });
  });

  it("USE_PROMETHEUS opens sluice's metrics at PROMETHEUS_ADDR and PROMETHEUS_PATH", () => {
    expect(settings({ USE_STATSD: "false", USE_PROMETHEUS: "true" }).prometheus).toEqual({ host: "0.0.0.0", port: 9090, path: "/metrics" });
    expect(settings({ USE_STATSD: "false", USE_PROMETHEUS: "true", PROMETHEUS_ADDR: "127.0.0.1:9191", PROMETHEUS_PATH: "/prom" }).prometheus).toEqual({
      host: "127.0.0.1",
      port: 9191,
      path: "/prom",
    });
    // Envoy Gateway sets it on every Deployment: noted, not refused.
    expect(notes(settings({ USE_PROMETHEUS: "true", USE_STATSD: "false", PROMETHEUS_MAPPER_YAML: "/m.yaml" }))).toEqual(["PROMETHEUS_MAPPER_YAML*"]);
    expect(refusal({ USE_PROMETHEUS: "true", USE_STATSD: "false", PROMETHEUS_ADDR: "9090" })).toBe(
      "PROMETHEUS_ADDR=9090 (envoyproxy/ratelimit setting): takes [host]:port, e.g. :9090",
    );
    expect(notes(settings({ PROMETHEUS_PATH: "/x" }))).toEqual(["PROMETHEUS_PATH*"]);
  });

  it("EXTRA_TAGS become constant metric labels", () => {
    expect(settings({ EXTRA_TAGS: "env:prod,team:edge" }).metricLabels).toEqual({ env: "prod", team: "edge" });
    expect(refusal({ EXTRA_TAGS: "env" })).toBe("EXTRA_TAGS=env (envoyproxy/ratelimit setting): takes tag:value[,tag:value...]");
    expect(refusal({ EXTRA_TAGS: "domain:x" })).toMatch(/^EXTRA_TAGS=domain:x \(envoyproxy\/ratelimit setting\): 'domain' cannot be a metric label/);
  });
});

describe("decisions: modes, headers, metadata, key prefix", () => {
  it("SHADOW_MODE and QUOTA_MODE set the global modes", () => {
    const s = settings({ SHADOW_MODE: "true", QUOTA_MODE: "1" });
    expect([s.globalShadowMode, s.globalQuotaMode]).toEqual([true, true]);
  });

  it("CACHE_KEY_PREFIX is --key-prefix's reference twin", () => {
    expect(settings({ CACHE_KEY_PREFIX: "edge_" }).keyPrefix).toBe("edge_");
    expect(settings({ CACHE_KEY_PREFIX: "edge_", SLUICE_KEY_PREFIX: "mine:" }).keyPrefix).toBe("mine:");
    expect(settings({ CACHE_KEY_PREFIX: "edge_" }, ["--key-prefix", "flag:"]).keyPrefix).toBe("flag:");
    expect(refusal({ CACHE_KEY_PREFIX: "a{b}" })).toBe(
      "CACHE_KEY_PREFIX=a{b} (envoyproxy/ratelimit setting): must not contain { or } (a Redis Cluster hash tag)",
    );
    expect(refusal({}, ["--key-prefix", "two words"])).toBe("--key-prefix takes printable ASCII characters without spaces, got 'two words'");
  });

  it("LIMIT_RESPONSE_HEADERS_ENABLED and the names are SLUICE_RESPONSE_HEADERS and SLUICE_RESPONSE_HEADER_*'s twins", () => {
    const on = settings({ LIMIT_RESPONSE_HEADERS_ENABLED: "true", LIMIT_LIMIT_HEADER: "X-Limit", LIMIT_RESET_HEADER: "X-Reset" });
    expect([on.responseHeaders, notes(on)]).toEqual([{ enabled: true, limit: "X-Limit", remaining: "RateLimit-Remaining", reset: "X-Reset" }, []]);
    // Names without the headers on: noted, not used.
    const off = settings({ LIMIT_LIMIT_HEADER: "X-Limit" });
    expect([off.responseHeaders, notes(off)]).toEqual([
      { enabled: false, limit: "RateLimit-Limit", remaining: "RateLimit-Remaining", reset: "RateLimit-Reset" },
      ["LIMIT_LIMIT_HEADER*"],
    ]);
    // Sluice's own settings win, and turn the reference's names on too.
    const own = settings({ LIMIT_RESPONSE_HEADERS_ENABLED: "true", LIMIT_REMAINING_HEADER: "X-Left", SLUICE_RESPONSE_HEADER_REMAINING: "X-Mine" });
    expect(own.responseHeaders).toEqual({ enabled: true, limit: "RateLimit-Limit", remaining: "X-Mine", reset: "RateLimit-Reset" });
    expect(settings({ SLUICE_RESPONSE_HEADERS: "1", LIMIT_LIMIT_HEADER: "X-Limit" }).responseHeaders.limit).toBe("X-Limit");
    expect(settings({ LIMIT_RESPONSE_HEADERS_ENABLED: "true", SLUICE_RESPONSE_HEADERS: "false" }).responseHeaders.enabled).toBe(false);
    expect(refusal({ LIMIT_RESET_HEADER: "Rate Limit" })).toBe("LIMIT_RESET_HEADER=Rate Limit (envoyproxy/ratelimit setting): must be an HTTP header name");
    expect(refusal({ LIMIT_RESPONSE_HEADERS_ENABLED: "true", LIMIT_LIMIT_HEADER: "retry-after" })).toBe(
      "LIMIT_LIMIT_HEADER=retry-after (envoyproxy/ratelimit setting): must not be content-type or Retry-After (sluice sets them on a refusal)",
    );
    expect(refusal({ LIMIT_RESPONSE_HEADERS_ENABLED: "true", LIMIT_LIMIT_HEADER: "X-A", LIMIT_RESET_HEADER: "x-a" })).toBe(
      "SLUICE_RESPONSE_HEADER_LIMIT, _REMAINING and _RESET must be three different names, got 'X-A', 'RateLimit-Remaining', 'x-a'",
    );
    expect(refusal({ SLUICE_RESPONSE_HEADER_RESET: "a:b" })).toBe("SLUICE_RESPONSE_HEADER_RESET must be an HTTP header name, got 'a:b'");
  });

  it("RESPONSE_DYNAMIC_METADATA=true is SLUICE_RESPONSE_DYNAMIC_METADATA=reference; false keeps sluice's default", () => {
    expect(settings({}).responseMetadata).toBe("rules");
    expect(settings({ RESPONSE_DYNAMIC_METADATA: "true" }).responseMetadata).toBe("reference");
    expect(settings({ RESPONSE_DYNAMIC_METADATA: "true", SLUICE_RESPONSE_DYNAMIC_METADATA: "off" }).responseMetadata).toBe("off");
    expect(settings({ RESPONSE_DYNAMIC_METADATA: "false" }).responseMetadata).toBe("rules");
    expect(refusal({ SLUICE_RESPONSE_DYNAMIC_METADATA: "all" })).toBe("SLUICE_RESPONSE_DYNAMIC_METADATA must be one of rules, reference, off, got 'all'");
    // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT is used with the reference's keys (on by default here); off, it is noted.
    const env = { RESPONSE_DYNAMIC_METADATA: "false", STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: "true", EXPIRATION_JITTER_MAX_SECONDS: "0" };
    expect(notes(settings(env))).toEqual(["EXPIRATION_JITTER_MAX_SECONDS*"]);
    expect(notes(settings({ ...env, SLUICE_REFERENCE_KEYS: "false" }))).toEqual(["EXPIRATION_JITTER_MAX_SECONDS*", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT*"]);
  });
});

describe('docs/configuration.md "Reference environment variables"', () => {
  it("has one row per variable of the reference, with its default, and no other", () => {
    const lines = fs.readFileSync(path.join(import.meta.dirname, "../../docs/configuration.md"), "utf8").split("\n");
    const start = lines.findIndex((l) => /^\|\s*variable\s*\|\s*reference default\s*\|\s*sluice\s*\|/.test(l));
    expect(start).toBeGreaterThanOrEqual(0);
    const rows: [string, string][] = [];
    for (const line of lines.slice(start + 2)) {
      if (!line.startsWith("|")) break;
      const [name, def, what] = line.split(" | ").map((c) => c.replace(/^\| /, ""));
      expect(what.trim(), name).not.toBe("");
      rows.push([name.replace(/`/g, ""), def === "—" ? "" : def.replace(/`/g, "")]);
    }
    expect(rows).toEqual([...referenceList()]);
  });
});
