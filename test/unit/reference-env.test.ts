// envoyproxy/ratelimit's environment -> Settings: each group of variables honoured, ignored with a note,
// or refused with a message naming the variable; precedence flag > SLUICE_* > reference > default.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readReferenceEnv } from "../../src/compat/reference-env.js";
import { serveSettings, UsageError, type Settings } from "../../src/settings.js";
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
      configDir: s.configDir, port: s.port, host: s.host, adminPort: s.adminPort, adminHost: s.adminHost, logLevel: s.logLevel,
      logFormat: s.logFormat, redisUrls: s.redisUrls, redisCluster: s.redisCluster, redisSentinel: s.redisSentinel, mergeDomains: s.mergeDomains,
      denyNoteMax: s.denyNoteMax, tls: s.tls, keyPrefix: s.keyPrefix,
    }).toEqual({
      configDir: "config", port: 8081, host: "0.0.0.0", adminPort: 8080, adminHost: "127.0.0.1", logLevel: "info",
      logFormat: "json", redisUrls: [], redisCluster: [], redisSentinel: undefined, mergeDomains: false,
      denyNoteMax: 10_000, tls: undefined, keyPrefix: "",
    });
    expect(s.redisAuth).toEqual({});
    expect({
      referenceHttp: s.referenceHttp, referenceDebug: s.referenceDebug, prometheus: s.prometheus, globalShadowMode: s.globalShadowMode,
      globalQuotaMode: s.globalQuotaMode, healthCheck: s.healthCheck, forceStartWithoutRules: s.forceStartWithoutRules,
      grpcMaxConnectionAge: s.grpcMaxConnectionAge, metricLabels: s.metricLabels, runtimeLayout: s.runtimeLayout, referenceNotes: s.referenceNotes,
      responseHeaders: s.responseHeaders,
    }).toEqual({
      referenceHttp: undefined, referenceDebug: undefined, prometheus: undefined, globalShadowMode: false, globalQuotaMode: false,
      healthCheck: { atLeastOneDomain: false, storeConnected: false }, forceStartWithoutRules: false, grpcMaxConnectionAge: undefined,
      metricLabels: {}, runtimeLayout: undefined, referenceNotes: [],
      responseHeaders: { enabled: false, limit: "RateLimit-Limit", remaining: "RateLimit-Remaining", reset: "RateLimit-Reset" },
    });
  });

  it("every variable of the reference's list is read, and no other", () => {
    const { read } = readReferenceEnv({}, () => false);
    expect([...read].sort()).toEqual([...referenceList().keys()].sort());
  });

  it("every variable set to the reference's own default is accepted, but USE_STATSD=true (no StatsD sink yet)", () => {
    const env = Object.fromEntries([...referenceList()].filter(([, v]) => v !== ""));
    env.USE_STATSD = "false";
    env.PORT = "0";
    env.DEBUG_PORT = "0";
    const s = settings(env);
    expect(s.redisUrls).toEqual(["unix:///var/run/nutcracker/ratelimit.sock"]);
    expect(s.configDir).toBe("/srv/runtime_data/current/config");
    expect(s.logLevel).toBe("warn");
    expect(s.logFormat).toBe("text");
    expect(s.denyNoteMax).toBe(0);
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
    expect(refusal({ SHADOW_MODE: "yes" })).toBe("SHADOW_MODE=yes (envoyproxy/ratelimit setting): must be true or false (or 1, 0, t, f)");
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
    expect(refusal({ RUNTIME_IGNOREDOTFILES: "maybe" })).toBe("RUNTIME_IGNOREDOTFILES=maybe (envoyproxy/ratelimit setting): must be true or false (or 1, 0, t, f)");
  });

  it("CONFIG_TYPE, MERGE_DOMAIN_CONFIG, FORCE_START_WITHOUT_INITIAL_CONFIG, HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", () => {
    expect(refusal({ CONFIG_TYPE: "GRPC_XDS_SOTW" })).toBe(
      "CONFIG_TYPE=GRPC_XDS_SOTW (envoyproxy/ratelimit setting): rules from an xDS server are not supported yet: use CONFIG_TYPE=FILE with rule files (RUNTIME_ROOT)",
    );
    expect(refusal({ CONFIG_TYPE: "file" })).toBe("CONFIG_TYPE=file (envoyproxy/ratelimit setting): must be FILE");
    const s = settings({ CONFIG_TYPE: "FILE", MERGE_DOMAIN_CONFIG: "true", FORCE_START_WITHOUT_INITIAL_CONFIG: "1", HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: "T" });
    expect([s.mergeDomains, s.forceStartWithoutRules, s.healthCheck]).toEqual([true, true, { atLeastOneDomain: true, storeConnected: false }]);
    expect(settings({ MERGE_DOMAIN_CONFIG: "true", SLUICE_MERGE_DOMAINS: "0" }).mergeDomains).toBe(false);
    expect(notes(settings({ CONFIG_GRPC_XDS_SERVER_URL: "xds:18000" }))).toEqual(["CONFIG_GRPC_XDS_SERVER_URL*"]);
  });
});

describe("Redis: REDIS_*", () => {
  it("single over tcp (host:port or a redis:// URL), over a unix socket (the reference's default socket type)", () => {
    expect(settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "redis.internal:6380" }).redisUrls).toEqual(["redis://redis.internal:6380"]);
    expect(settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "redis://r:6379/2" }).redisUrls).toEqual(["redis://r:6379/2"]);
    expect(settings({ REDIS_URL: "/run/redis/redis.sock" }).redisUrls).toEqual(["unix:///run/redis/redis.sock"]);
    expect(settings({ REDIS_SOCKET_TYPE: "UNIX", REDIS_URL: "/run/my redis.sock" }).redisUrls).toEqual(["unix:///run/my%20redis.sock"]);
  });

  it("cluster and sentinel", () => {
    expect(settings({ REDIS_TYPE: "CLUSTER", REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "a:7000,b:7001" }).redisCluster).toEqual([
      { host: "a", port: 7000 },
      { host: "b", port: 7001 },
    ]);
    const s = settings({ REDIS_TYPE: "sentinel", REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "mymaster,s1:26379,[::1]:26380", REDIS_SENTINEL_AUTH: "spw" });
    expect(s.redisSentinel).toEqual({ name: "mymaster", sentinels: [{ host: "s1", port: 26379 }, { host: "::1", port: 26380 }] });
    expect([s.redisSentinelAuth.username, s.redisSentinelAuth.password?.reveal()]).toEqual([undefined, "spw"]);
    const own = settings({ REDIS_SENTINEL_AUTH: "admin:spw" }, ["--redis-sentinel", "m@s1:26379"]);
    expect([own.redisSentinelAuth.username, own.redisSentinelAuth.password?.reveal()]).toEqual(["admin", "spw"]);
    expect(notes(settings({ REDIS_SENTINEL_AUTH: "spw" }))).toEqual(["REDIS_SENTINEL_AUTH*"]);
    expect(refusal({ REDIS_TYPE: "sentinel", REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "s1:26379" })).toMatch(/^REDIS_URL=s1:26379 \(envoyproxy\/ratelimit setting\): REDIS_URL takes MASTERNAME,host:port/);
  });

  it("REDIS_AUTH: password, or user:password; sluice's own credentials win", () => {
    const a = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:6379", REDIS_AUTH: "app:s3cr:et" }).redisAuth;
    expect([a.username, a.password?.reveal()]).toEqual(["app", "s3cr:et"]);
    const b = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:6379", REDIS_AUTH: "s3cret" }).redisAuth;
    expect([b.username, b.password?.reveal()]).toEqual([undefined, "s3cret"]);
    const own = settings({ REDIS_AUTH: "s3cret", SLUICE_REDIS_PASSWORD_FILE: "/run/pw" });
    expect([own.redisAuth.password, own.redisAuth.passwordFile, notes(own)]).toEqual([undefined, "/run/pw", ["REDIS_AUTH*"]]);
    // The password never shows in a note or an error.
    expect(JSON.stringify(own.referenceNotes)).not.toContain("s3cret");
  });

  it("REDIS_TLS with CA and client certificate", () => {
    const s = settings({
      REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:6380", REDIS_TLS: "true", REDIS_TLS_CACERT: "/ca.pem",
      REDIS_TLS_CLIENT_CERT: "/c.pem", REDIS_TLS_CLIENT_KEY: "/k.pem",
    });
    expect([s.redisUrls, s.redisAuth.tlsCaFile, s.redisAuth.tlsCertFile, s.redisAuth.tlsKeyFile]).toEqual([["rediss://r:6380"], "/ca.pem", "/c.pem", "/k.pem"]);
    expect(settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "redis://r:6380", REDIS_TLS: "true" }).redisUrls).toEqual(["rediss://r:6380"]);
    const off = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:6380", REDIS_TLS_CACERT: "/ca.pem" });
    expect([off.redisUrls, off.redisAuth.tlsCaFile, notes(off)]).toEqual([["redis://r:6380"], undefined, ["REDIS_TLS_CACERT*"]]);
  });

  it("sluice's own store wins over REDIS_URL", () => {
    const s = settings({ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "r:6379", REDIS_TYPE: "cluster" }, ["--redis", "redis://mine:6379"]);
    expect([s.redisUrls, s.redisCluster, notes(s)]).toEqual([["redis://mine:6379"], [], ["REDIS_URL*", "REDIS_SOCKET_TYPE*", "REDIS_TYPE*"]]);
  });

  it("what sluice cannot honour is refused, naming the variable", () => {
    const cases: [Record<string, string>, string][] = [
      [{ REDIS_TYPE: "ring" }, "REDIS_TYPE=ring (envoyproxy/ratelimit setting): must be SINGLE, CLUSTER or SENTINEL"],
      [{ REDIS_SOCKET_TYPE: "udp", REDIS_URL: "r:1" }, "REDIS_SOCKET_TYPE=udp (envoyproxy/ratelimit setting): must be tcp or unix"],
      [{ REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "redis-host" }, "REDIS_URL=redis-host (envoyproxy/ratelimit setting): with REDIS_SOCKET_TYPE=tcp takes host:port (or redis://host:port)"],
      [{ REDIS_TYPE: "cluster", REDIS_URL: "a:1" }, "REDIS_TYPE=cluster (envoyproxy/ratelimit setting): needs REDIS_SOCKET_TYPE=tcp (the reference's default is unix): REDIS_URL then lists host:port addresses"],
      [{ REDIS_TYPE: "sentinel", REDIS_SOCKET_TYPE: "unix", REDIS_URL: "m,s:1" }, "REDIS_TYPE=sentinel (envoyproxy/ratelimit setting): needs REDIS_SOCKET_TYPE=tcp: REDIS_URL then lists host:port addresses"],
      [{ REDIS_TYPE: "cluster", REDIS_SOCKET_TYPE: "tcp", REDIS_URL: "a:1", REDIS_TLS: "true" }, "REDIS_TLS=true (envoyproxy/ratelimit setting): sluice's Redis Cluster store connects without TLS"],
      [{ REDIS_URL: "/r.sock", REDIS_TLS: "true" }, "REDIS_TLS=true (envoyproxy/ratelimit setting): sluice does not speak TLS over a unix socket"],
      [{ BACKEND_TYPE: "memcache" }, "BACKEND_TYPE=memcache (envoyproxy/ratelimit setting): sluice has no memcached store: use Redis (BACKEND_TYPE=redis and REDIS_URL)"],
      [{ REDIS_PERSECOND: "true" }, "REDIS_PERSECOND=true (envoyproxy/ratelimit setting): a second Redis for per-second limits is not supported yet: unset it (per-second limits then count in REDIS_URL's Redis)"],
      [{ REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: "true" }, "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION=true (envoyproxy/ratelimit setting): sluice always checks the Redis server's name: give REDIS_URL the name its certificate carries"],
      [{ REDIS_POOL_SIZE: "many" }, "REDIS_POOL_SIZE=many (envoyproxy/ratelimit setting): must be an integer from 0 to 1000000"],
      [{ REDIS_TIMEOUT: "10" }, "REDIS_TIMEOUT=10 (envoyproxy/ratelimit setting): must be a duration like 300ms, 10s, 1h30m"],
    ];
    for (const [env, message] of cases) expect(refusal(env)).toBe(message);
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
    expect([s.referenceHttp, s.referenceDebug]).toEqual([{ host: "0.0.0.0", port: 8080 }, { host: "127.0.0.1", port: 6070 }]);
    expect(settings({ HOST: "127.0.0.1" }, ["--admin-port", "0"]).referenceHttp).toEqual({ host: "127.0.0.1", port: 8080 });
  });

  it("a port clash is named before binding", () => {
    expect(refusal({ PORT: "8080" })).toBe(
      "sluice's admin port (--admin-port or SLUICE_ADMIN_PORT, default 8080) and PORT (the reference's HTTP port: /healthcheck, /json) both use port 8080: give one of them another port",
    );
    expect(refusal({ DEBUG_PORT: "8081" })).toBe(
      "the gRPC port (--port, SLUICE_PORT or GRPC_PORT) and DEBUG_PORT (the reference's debug port: /rlconfig) both use port 8081: give one of them another port",
    );
    // Different addresses on one port are fine.
    expect(settings({ PORT: "8080", HOST: "10.0.0.5" }).referenceHttp).toEqual({ host: "10.0.0.5", port: 8080 });
  });

  it("GRPC_UDS and connection age", () => {
    expect(refusal({ GRPC_UDS: "/tmp/rl.sock" })).toBe(
      "GRPC_UDS=/tmp/rl.sock (envoyproxy/ratelimit setting): sluice serves gRPC on TCP only: unset GRPC_UDS and give GRPC_PORT (and GRPC_HOST)",
    );
    expect(settings({ GRPC_MAX_CONNECTION_AGE: "1440m", GRPC_MAX_CONNECTION_AGE_GRACE: "3600s" }).grpcMaxConnectionAge).toEqual({ ageMs: 86_400_000, graceMs: 3_600_000 });
    expect(refusal({ GRPC_MAX_CONNECTION_AGE: "12h" })).toBe(
      "GRPC_MAX_CONNECTION_AGE=12h (envoyproxy/ratelimit setting): sluice does not close connections by age yet; only the default 24h is accepted",
    );
    expect(refusal({ GRPC_MAX_CONNECTION_AGE_GRACE: "5m" })).toBe(
      "GRPC_MAX_CONNECTION_AGE_GRACE=5m (envoyproxy/ratelimit setting): sluice does not close connections by age yet; only the default 1h is accepted",
    );
  });

  it("gRPC TLS maps to --tls-*; SAN checks are refused; files without GRPC_SERVER_USE_TLS are noted", () => {
    const env = { GRPC_SERVER_USE_TLS: "true", GRPC_SERVER_TLS_CERT: "/c.pem", GRPC_SERVER_TLS_KEY: "/k.pem", GRPC_CLIENT_TLS_CACERT: "/ca.pem" };
    expect(settings(env).tls).toEqual({ certFile: "/c.pem", keyFile: "/k.pem", caFile: "/ca.pem", reloadMs: 5000 });
    expect(settings(env, ["--tls-cert", "mine.pem", "--tls-key", "mine.key"]).tls).toEqual({ certFile: "mine.pem", keyFile: "mine.key", caFile: undefined, reloadMs: 5000 });
    expect(refusal({ GRPC_SERVER_USE_TLS: "true", GRPC_SERVER_TLS_CERT: "/c.pem" })).toBe(
      "GRPC_SERVER_USE_TLS=true (envoyproxy/ratelimit setting): needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY",
    );
    expect(refusal({ ...env, GRPC_CLIENT_TLS_SAN: "envoy.internal" })).toMatch(/^GRPC_CLIENT_TLS_SAN=envoy.internal \(envoyproxy\/ratelimit setting\): sluice does not check the name in client certificates/);
    const off = settings({ GRPC_SERVER_TLS_CERT: "/c.pem" });
    expect([off.tls, notes(off)]).toEqual([undefined, ["GRPC_SERVER_TLS_CERT*"]]);
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

  it("NEAR_LIMIT_RATIO: 0.8 only; TRACING_ENABLED refused", () => {
    expect(settings({ NEAR_LIMIT_RATIO: "0.80" }).referenceNotes).toEqual([]);
    expect(refusal({ NEAR_LIMIT_RATIO: "0.9" })).toBe(
      "NEAR_LIMIT_RATIO=0.9 (envoyproxy/ratelimit setting): sluice counts near_limit from 80 % of a limit (sluice_rule_near_limit_total); only 0.8 is accepted",
    );
    expect(refusal({ TRACING_ENABLED: "true" })).toBe("TRACING_ENABLED=true (envoyproxy/ratelimit setting): sluice does not export traces: unset it or set it to false");
  });

  it("StatsD: refused where the reference would send it; fine once USE_STATSD=false or DISABLE_STATS=true", () => {
    const why = "sluice has no StatsD sink yet: set USE_STATSD=false and read sluice's Prometheus metrics (USE_PROMETHEUS=true, or /metrics on the admin port)";
    expect(refusal({ USE_STATSD: "true" })).toBe(`USE_STATSD=true (envoyproxy/ratelimit setting): ${why}`);
    expect(refusal({ STATSD_HOST: "statsd" })).toBe(`STATSD_HOST=statsd (envoyproxy/ratelimit setting): with USE_STATSD unset (the reference's default is true): ${why}`);
    expect(notes(settings({ USE_STATSD: "false", STATSD_HOST: "statsd" }))).toEqual(["STATSD_HOST*"]);
    const disabled = settings({ DISABLE_STATS: "true", USE_STATSD: "true", USE_PROMETHEUS: "true" });
    expect([disabled.prometheus, notes(disabled)]).toEqual([undefined, ["USE_STATSD", "USE_PROMETHEUS*"]]);
    expect(refusal({ USE_DOG_STATSD: "true", USE_STATSD: "false" })).toBe(
      "USE_DOG_STATSD=true (envoyproxy/ratelimit setting): sluice has no DogStatsD sink: set it to false and scrape sluice's Prometheus metrics",
    );
  });

  it("USE_PROMETHEUS opens sluice's metrics at PROMETHEUS_ADDR and PROMETHEUS_PATH", () => {
    expect(settings({ USE_STATSD: "false", USE_PROMETHEUS: "true" }).prometheus).toEqual({ host: "0.0.0.0", port: 9090, path: "/metrics" });
    expect(settings({ USE_STATSD: "false", USE_PROMETHEUS: "true", PROMETHEUS_ADDR: "127.0.0.1:9191", PROMETHEUS_PATH: "/prom" }).prometheus).toEqual({
      host: "127.0.0.1", port: 9191, path: "/prom",
    });
    expect(refusal({ USE_PROMETHEUS: "true", USE_STATSD: "false", PROMETHEUS_MAPPER_YAML: "/m.yaml" })).toMatch(/^PROMETHEUS_MAPPER_YAML=\/m.yaml \(envoyproxy\/ratelimit setting\): sluice's metric names are its own/);
    expect(refusal({ USE_PROMETHEUS: "true", USE_STATSD: "false", PROMETHEUS_ADDR: "9090" })).toBe("PROMETHEUS_ADDR=9090 (envoyproxy/ratelimit setting): takes [host]:port, e.g. :9090");
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
    expect(refusal({ CACHE_KEY_PREFIX: "a{b}" })).toBe("CACHE_KEY_PREFIX=a{b} (envoyproxy/ratelimit setting): must not contain { or } (a Redis Cluster hash tag)");
    expect(refusal({}, ["--key-prefix", "two words"])).toBe("--key-prefix takes printable ASCII characters without spaces, got 'two words'");
  });

  it("response headers and dynamic metadata: refused when turned on, names checked", () => {
    expect(settings({ LIMIT_LIMIT_HEADER: "X-Limit" }).responseHeaders).toEqual({ enabled: false, limit: "X-Limit", remaining: "RateLimit-Remaining", reset: "RateLimit-Reset" });
    expect(refusal({ LIMIT_RESPONSE_HEADERS_ENABLED: "true" })).toMatch(/^LIMIT_RESPONSE_HEADERS_ENABLED=true \(envoyproxy\/ratelimit setting\): sluice does not add RateLimit-\* headers itself yet/);
    expect(refusal({ LIMIT_RESET_HEADER: "Rate Limit" })).toBe("LIMIT_RESET_HEADER=Rate Limit (envoyproxy/ratelimit setting): must be an HTTP header name");
    expect(refusal({ RESPONSE_DYNAMIC_METADATA: "true" })).toMatch(/^RESPONSE_DYNAMIC_METADATA=true \(envoyproxy\/ratelimit setting\): the reference's dynamic metadata/);
    expect(notes(settings({ RESPONSE_DYNAMIC_METADATA: "false", STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: "true", EXPIRATION_JITTER_MAX_SECONDS: "0" }))).toEqual([
      "EXPIRATION_JITTER_MAX_SECONDS*",
      "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT*",
    ]);
  });
});

describe("README \"Reference environment variables\"", () => {
  it("has one row per variable of the reference, with its default, and no other", () => {
    const lines = fs.readFileSync(path.join(import.meta.dirname, "../../README.md"), "utf8").split("\n");
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
