// The reference's store settings: BACKEND_TYPE, REDIS_* (single, cluster, sentinel; tcp or unix
// socket; AUTH; TLS) -> sluice's --redis / --redis-cluster / --redis-sentinel and credentials.
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseReferenceSentinelUrl } from "../store/redis-sentinel.js";
import type { ReferenceReader } from "./reader.js";

export interface RedisPart {
  /** REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: /healthcheck fails while a store node is not connected. */
  storeConnected: boolean;
}

const MEMCACHE = [
  "MEMCACHE_HOST_PORT", "MEMCACHE_MAX_IDLE_CONNS", "MEMCACHE_SRV", "MEMCACHE_SRV_REFRESH", "MEMCACHE_TLS",
  "MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY", "MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
];
const PERSECOND = [
  "REDIS_PERSECOND_SOCKET_TYPE", "REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_URL", "REDIS_PERSECOND_POOL_SIZE",
  "REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_TLS", "REDIS_PERSECOND_SENTINEL_AUTH", "REDIS_PERSECOND_PIPELINE_WINDOW",
  "REDIS_PERSECOND_PIPELINE_LIMIT", "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "REDIS_PERSECOND_TIMEOUT",
  "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR",
];
const STORE = ["REDIS_URL", "REDIS_SOCKET_TYPE", "REDIS_TYPE"];
const TLS = ["REDIS_TLS", "REDIS_TLS_CACERT", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY"];

export function readRedis(r: ReferenceReader): RedisPart {
  const backend = r.str("BACKEND_TYPE", "redis");
  if (backend === "memcache") throw r.error("BACKEND_TYPE", "sluice has no memcached store: use Redis (BACKEND_TYPE=redis and REDIS_URL)");
  if (backend !== "redis") throw r.error("BACKEND_TYPE", "must be redis");
  for (const v of MEMCACHE) r.ignore(v, "used only with BACKEND_TYPE=memcache, which sluice does not support");

  if (r.bool("REDIS_PERSECOND", false)) {
    throw r.error("REDIS_PERSECOND", "a second Redis for per-second limits is not supported yet: unset it (per-second limits then count in REDIS_URL's Redis)");
  }
  for (const v of PERSECOND) r.ignore(v, "used only with REDIS_PERSECOND=true");

  readTuning(r);
  if (r.bool("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)) {
    throw r.error("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "sluice always checks the Redis server's name: give REDIS_URL the name its certificate carries");
  }

  const tls = r.bool("REDIS_TLS", false);
  const ownStore = r.own("redis", "SLUICE_REDIS") || r.own("redis-cluster", "SLUICE_REDIS_CLUSTER") || r.own("redis-sentinel", "SLUICE_REDIS_SENTINEL");
  const type = redisType(r);
  if (ownStore) {
    for (const v of [...STORE, ...TLS]) r.ignore(v, "sluice's own --redis, --redis-cluster or --redis-sentinel (or its SLUICE_* variable) is given and wins");
  } else if (r.any(...STORE)) {
    mapStore(r, type, tls);
  } else {
    for (const v of TLS) r.ignore(v, "no Redis from REDIS_URL, REDIS_SOCKET_TYPE or REDIS_TYPE to apply it to");
  }
  mapAuth(r);
  // The sentinels' credentials apply to a Sentinel from REDIS_TYPE or from sluice's own --redis-sentinel.
  if ((type === "sentinel" && !ownStore) || r.own("redis-sentinel", "SLUICE_REDIS_SENTINEL")) mapSentinelAuth(r);
  else r.ignore("REDIS_SENTINEL_AUTH", "used only with a Redis Sentinel");

  return { storeConnected: r.bool("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false) };
}

/** Connection pool and pipeline knobs: checked like the reference does, not used (README). */
function readTuning(r: ReferenceReader): void {
  r.int("REDIS_POOL_SIZE", 10, 0, 1_000_000);
  r.ignore("REDIS_POOL_SIZE", "sluice keeps one pipelined connection per Redis node");
  r.durationMs("REDIS_PIPELINE_WINDOW", 0);
  r.ignore("REDIS_PIPELINE_WINDOW", "sluice writes the script calls of one event-loop turn together, without waiting");
  r.int("REDIS_PIPELINE_LIMIT", 0, 0, 1_000_000_000);
  r.ignore("REDIS_PIPELINE_LIMIT", "deprecated in the reference; sluice batches at most 32 calls per write");
  r.int("REDIS_CLUSTER_PIPELINE_PARALLELISM", 1, 0, 1_000_000);
  r.ignore("REDIS_CLUSTER_PIPELINE_PARALLELISM", "sluice sends each cluster node its calls without waiting for other nodes");
  r.durationMs("REDIS_TIMEOUT", 10_000);
  r.ignore("REDIS_TIMEOUT", "a store call is bounded by SLUICE_STORE_TIMEOUT_MS (50 ms), then the limit's failure_mode answers");
  const onEmpty = r.str("REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT").toUpperCase();
  if (!["WAIT", "CREATE", "ERROR"].includes(onEmpty)) throw r.error("REDIS_POOL_ON_EMPTY_BEHAVIOR", "must be WAIT, CREATE or ERROR");
  r.ignore("REDIS_POOL_ON_EMPTY_BEHAVIOR", "sluice has no connection pool to wait on");
  for (const v of ["REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"]) {
    r.durationMs(v, 0);
    r.ignore(v, "sluice starts without waiting for Redis and reconnects within 0.5 s; meanwhile failure_mode answers and /healthcheck fails");
  }
}

type RedisType = "single" | "cluster" | "sentinel";

function redisType(r: ReferenceReader): RedisType {
  const t = r.str("REDIS_TYPE", "SINGLE").toLowerCase();
  if (t !== "single" && t !== "cluster" && t !== "sentinel") throw r.error("REDIS_TYPE", "must be SINGLE, CLUSTER or SENTINEL");
  return t;
}

/** REDIS_URL in the form REDIS_TYPE and REDIS_SOCKET_TYPE give it -> SLUICE_REDIS, _CLUSTER or _SENTINEL. */
function mapStore(r: ReferenceReader, type: RedisType, tls: boolean): void {
  const socket = r.str("REDIS_SOCKET_TYPE", "unix").toLowerCase();
  if (!["tcp", "tcp4", "tcp6", "unix"].includes(socket)) throw r.error("REDIS_SOCKET_TYPE", "must be tcp or unix");
  const url = r.str("REDIS_URL", "/var/run/nutcracker/ratelimit.sock");
  if (socket === "unix" && type !== "single") {
    const unixDefault = r.has("REDIS_SOCKET_TYPE") ? "" : " (the reference's default is unix)";
    throw r.error("REDIS_TYPE", `needs REDIS_SOCKET_TYPE=tcp${unixDefault}: REDIS_URL then lists host:port addresses`);
  }
  if (!tls) for (const v of TLS.slice(1)) r.ignore(v, "used only with REDIS_TLS=true, as in the reference");
  if (tls && type !== "single") throw r.error("REDIS_TLS", `sluice's ${type === "cluster" ? "Redis Cluster" : "Sentinel"} store connects without TLS`);

  if (type === "cluster") {
    for (const node of url.split(",")) if (!hostPort(node.trim())) throw r.error("REDIS_URL", "with REDIS_TYPE=cluster takes host:port[,host:port...]");
    r.map("SLUICE_REDIS_CLUSTER", url);
  } else if (type === "sentinel") {
    let spec;
    try {
      spec = parseReferenceSentinelUrl(url);
    } catch (err) {
      throw r.error("REDIS_URL", (err as Error).message);
    }
    const hosts = spec.sentinels.map((s) => `${s.host.includes(":") ? `[${s.host}]` : s.host}:${s.port}`);
    r.map("SLUICE_REDIS_SENTINEL", `${spec.name}@${hosts.join(",")}`);
  } else if (socket === "unix") {
    if (tls) throw r.error("REDIS_TLS", "sluice does not speak TLS over a unix socket");
    // Go dials a relative socket path from the working directory, as path.resolve does.
    r.map("SLUICE_REDIS", "unix://" + pathToFileURL(path.resolve(url)).pathname);
  } else {
    r.map("SLUICE_REDIS", singleUrl(r, url, tls));
  }
  if (tls && !r.own(undefined, "SLUICE_REDIS_TLS_CA") && r.has("REDIS_TLS_CACERT")) r.map("SLUICE_REDIS_TLS_CA", r.str("REDIS_TLS_CACERT", ""));
  if (tls && r.any("REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY")) {
    if (!r.has("REDIS_TLS_CLIENT_CERT") || !r.has("REDIS_TLS_CLIENT_KEY")) throw r.error("REDIS_TLS_CLIENT_CERT", "and REDIS_TLS_CLIENT_KEY go together");
    if (!r.own(undefined, "SLUICE_REDIS_TLS_CERT") && !r.own(undefined, "SLUICE_REDIS_TLS_KEY")) {
      r.map("SLUICE_REDIS_TLS_CERT", r.str("REDIS_TLS_CLIENT_CERT", ""));
      r.map("SLUICE_REDIS_TLS_KEY", r.str("REDIS_TLS_CLIENT_KEY", ""));
    }
  }
}

/** host:port (the reference's form) or a redis:// URL -> a sluice Redis URL; REDIS_TLS makes it rediss://. */
function singleUrl(r: ReferenceReader, url: string, tls: boolean): string {
  if (/^rediss?:\/\//.test(url)) return tls ? url.replace(/^redis:/, "rediss:") : url;
  if (!hostPort(url)) throw r.error("REDIS_URL", "with REDIS_SOCKET_TYPE=tcp takes host:port (or redis://host:port)");
  return `${tls ? "rediss" : "redis"}://${url}`;
}

function hostPort(s: string): boolean {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s:/@[\]]+):(\d{1,5})$/.exec(s);
  return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 65535;
}

/** REDIS_AUTH: "password" or "user:password" -> SLUICE_REDIS_USERNAME / SLUICE_REDIS_PASSWORD. */
function mapAuth(r: ReferenceReader): void {
  if (!r.has("REDIS_AUTH")) return;
  if (r.own("redis-password-file", "SLUICE_REDIS_PASSWORD_FILE") || r.own(undefined, "SLUICE_REDIS_PASSWORD") || r.own(undefined, "SLUICE_REDIS_USERNAME")) {
    r.ignore("REDIS_AUTH", "sluice's own Redis credentials (SLUICE_REDIS_PASSWORD, _PASSWORD_FILE or _USERNAME) are given and win");
    return;
  }
  const { user, password } = splitAuth(r.str("REDIS_AUTH", ""));
  if (user) r.map("SLUICE_REDIS_USERNAME", user);
  r.map("SLUICE_REDIS_PASSWORD", password);
}

function mapSentinelAuth(r: ReferenceReader): void {
  if (!r.has("REDIS_SENTINEL_AUTH")) return;
  const own = ["SLUICE_REDIS_SENTINEL_USERNAME", "SLUICE_REDIS_SENTINEL_PASSWORD", "SLUICE_REDIS_SENTINEL_PASSWORD_FILE"];
  if (own.some((v) => r.own(undefined, v))) {
    r.ignore("REDIS_SENTINEL_AUTH", "sluice's own sentinel credentials (SLUICE_REDIS_SENTINEL_PASSWORD, _PASSWORD_FILE or _USERNAME) are given and win");
    return;
  }
  const { user, password } = splitAuth(r.str("REDIS_SENTINEL_AUTH", ""));
  if (user) r.map("SLUICE_REDIS_SENTINEL_USERNAME", user);
  r.map("SLUICE_REDIS_SENTINEL_PASSWORD", password);
}

/** As the reference: split at the first ':' (user:password), else the whole value is the password. */
function splitAuth(auth: string): { user?: string; password: string } {
  const colon = auth.indexOf(":");
  if (colon < 0) return { password: auth };
  return { user: auth.slice(0, colon) || undefined, password: auth.slice(colon + 1) };
}
