// The reference's store settings: BACKEND_TYPE, REDIS_* and REDIS_PERSECOND_* (single, cluster, sentinel;
// tcp or unix socket; AUTH; TLS) -> sluice's --redis / --redis-cluster / --redis-sentinel (and --redis-per-second*) and credentials.
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseHostPort } from "../../core/host-port.js";
import { parseReferenceSentinelUrl } from "../../store/redis-sentinel.js";
import { MAIN_STORE, PER_SECOND_STORE, type StoreNames } from "../redis-store.js";
import type { ReferenceReader } from "./reader.js";
import { REFERENCE_DEFAULTS } from "./defaults.js";

interface RedisPart {
  /** REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: /healthcheck fails while a store node is not connected. */
  storeConnected: boolean;
}

const MEMCACHE = [
  "MEMCACHE_HOST_PORT",
  "MEMCACHE_MAX_IDLE_CONNS",
  "MEMCACHE_SRV",
  "MEMCACHE_SRV_REFRESH",
  "MEMCACHE_TLS",
  "MEMCACHE_TLS_CLIENT_CERT",
  "MEMCACHE_TLS_CLIENT_KEY",
  "MEMCACHE_TLS_CACERT",
  "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
];
const PERSECOND = [
  "REDIS_PERSECOND_SOCKET_TYPE",
  "REDIS_PERSECOND_TYPE",
  "REDIS_PERSECOND_URL",
  "REDIS_PERSECOND_POOL_SIZE",
  "REDIS_PERSECOND_AUTH",
  "REDIS_PERSECOND_TLS",
  "REDIS_PERSECOND_SENTINEL_AUTH",
  "REDIS_PERSECOND_PIPELINE_WINDOW",
  "REDIS_PERSECOND_PIPELINE_LIMIT",
  "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM",
  "REDIS_PERSECOND_TIMEOUT",
  "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR",
];
/** The TLS files: the reference gives both stores the same ones, each with its own REDIS_TLS switch. */
const TLS_FILES = ["REDIS_TLS_CACERT", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY"];

/** One Redis store in the reference's variables and in sluice's settings: the main one or the per-second one. */
interface StoreVars {
  /** Starts the reference's variables: REDIS or REDIS_PERSECOND. */
  ref: "REDIS" | "REDIS_PERSECOND";
  /** Names its credentials and its sentinels' in notes. */
  label: string;
  sentinelLabel: string;
  urlDefault: string;
  /** sluice's own store: flags and their SLUICE_* variables (settings/redis-store.ts, from core/settings-table.ts). */
  own: [flag: string, env: string][];
  /** The ones whose form REDIS_TYPE picks, and the credentials. */
  single: string;
  cluster: string;
  sentinel: string;
  tlsCa: string;
  tlsCert: string;
  tlsKey: string;
  username: string;
  password: string;
  ownCredentials: [flag: string | undefined, env: string][];
  sentinelUsername: string;
  sentinelPassword: string;
  ownSentinelCredentials: string[];
}

/** The reference's side of one store, its sluice names taken from the store's flags and variables. */
function storeVars(ref: StoreVars["ref"], sentinelLabel: string, urlDefault: string, n: StoreNames): StoreVars {
  return {
    ref,
    label: n.label,
    sentinelLabel,
    urlDefault,
    own: [
      [n.flag, n.env],
      [n.clusterFlag, n.clusterEnv],
      [n.sentinelFlag, n.sentinelEnv],
    ],
    single: n.env,
    cluster: n.clusterEnv,
    sentinel: n.sentinelEnv,
    tlsCa: n.tlsCa,
    tlsCert: n.tlsCert,
    tlsKey: n.tlsKey,
    username: n.username,
    password: n.password,
    ownCredentials: [
      [n.passwordFileFlag, n.passwordFile],
      [undefined, n.password],
      [undefined, n.username],
    ],
    sentinelUsername: n.sentinelUsername,
    sentinelPassword: n.sentinelPassword,
    ownSentinelCredentials: [n.sentinelUsername, n.sentinelPassword, n.sentinelPasswordFile],
  };
}

const MAIN = storeVars("REDIS", "sentinel", REFERENCE_DEFAULTS.REDIS_URL, MAIN_STORE);
const PER_SECOND = storeVars("REDIS_PERSECOND", "per-second sentinel", REFERENCE_DEFAULTS.REDIS_PERSECOND_URL, PER_SECOND_STORE);

/** The store's REDIS_URL, REDIS_SOCKET_TYPE and REDIS_TYPE (or its REDIS_PERSECOND_* ones). */
const refStoreVars = (v: StoreVars) => [`${v.ref}_URL`, `${v.ref}_SOCKET_TYPE`, `${v.ref}_TYPE`];
const ownStore = (r: ReferenceReader, v: StoreVars) => v.own.some(([flag, env]) => r.own(flag, env));

export function readRedis(r: ReferenceReader): RedisPart {
  const backend = r.str("BACKEND_TYPE", "redis");
  if (backend === "memcache") throw r.error("BACKEND_TYPE", "sluice has no memcached store: use Redis (BACKEND_TYPE=redis and REDIS_URL)");
  if (backend !== "redis") throw r.error("BACKEND_TYPE", "must be redis");
  for (const v of MEMCACHE) r.ignore(v, "used only with BACKEND_TYPE=memcache, which sluice does not support");

  const perSecond = r.bool("REDIS_PERSECOND", false);
  if (!perSecond) for (const v of PERSECOND) r.ignore(v, "used only with REDIS_PERSECOND=true");

  readTuning(r, "REDIS");
  if (perSecond) readTuning(r, "REDIS_PERSECOND");
  readStartup(r);
  if (r.bool("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)) {
    throw r.error("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "sluice always checks the Redis server's name: give REDIS_URL the name its certificate carries");
  }

  // The per-second store takes the shared TLS files when its own REDIS_PERSECOND_TLS is on.
  const perSecondTls = perSecond && !ownStore(r, PER_SECOND) && r.bool("REDIS_PERSECOND_TLS", false);
  const mainMapped = readStore(r, MAIN, perSecondTls);
  if (perSecond) {
    if (!mainMapped && !ownStore(r, MAIN)) {
      throw r.error(
        "REDIS_PERSECOND",
        "needs the main Redis too: set REDIS_URL (or sluice's --redis, --redis-cluster or --redis-sentinel); sluice has no default Redis",
      );
    }
    readStore(r, PER_SECOND, true); // the shared TLS files are noted (if unused) with the main store
  }
  return { storeConnected: r.bool("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false) };
}

/**
 * One store's REDIS_URL, _SOCKET_TYPE, _TYPE, _TLS, _AUTH and _SENTINEL_AUTH (or REDIS_PERSECOND_*'s);
 * true when they name the store (sluice's own store wins). filesUsedElsewhere: the TLS files are the
 * other store's, so no note says they are unused.
 */
function readStore(r: ReferenceReader, v: StoreVars, filesUsedElsewhere: boolean): boolean {
  const STORE = refStoreVars(v);
  const TLS = [`${v.ref}_TLS`, ...(filesUsedElsewhere ? [] : TLS_FILES)];
  const tls = r.bool(`${v.ref}_TLS`, false);
  const own = ownStore(r, v);
  const type = redisType(r, v);
  // The per-second store is whatever its variables (or their defaults) say once REDIS_PERSECOND=true.
  const mapped = !own && (v === PER_SECOND || r.any(...STORE));
  if (own) {
    for (const name of [...STORE, ...TLS])
      r.ignore(name, `sluice's own --${v.own[0][0]}, --${v.own[1][0]} or --${v.own[2][0]} (or its SLUICE_* variable) is given and wins`);
  } else if (mapped) {
    if (!tls) for (const name of TLS.slice(1)) r.ignore(name, `used only with ${v.ref}_TLS=true, as in the reference`);
    mapStore(r, v, type, tls);
  } else {
    for (const name of TLS) r.ignore(name, "no Redis from REDIS_URL, REDIS_SOCKET_TYPE or REDIS_TYPE to apply it to");
  }
  mapAuth(r, v);
  // The sentinels' credentials apply to a Sentinel from REDIS_TYPE or from sluice's own --redis-sentinel.
  if ((type === "sentinel" && !own) || r.own(v.own[2][0], v.own[2][1])) mapSentinelAuth(r, v);
  else r.ignore(`${v.ref}_SENTINEL_AUTH`, "used only with a Redis Sentinel");
  return mapped;
}

/** Connection pool and pipeline knobs of one store (REDIS_* or REDIS_PERSECOND_*): checked like the reference does, not used (docs/configuration.md). */
function readTuning(r: ReferenceReader, p: StoreVars["ref"]): void {
  r.int(`${p}_POOL_SIZE`, 10, 0, 1_000_000);
  r.ignore(`${p}_POOL_SIZE`, "sluice keeps one pipelined connection per Redis node");
  r.durationMs(`${p}_PIPELINE_WINDOW`, 0);
  r.ignore(`${p}_PIPELINE_WINDOW`, "sluice writes the script calls of one event-loop turn together, without waiting");
  r.int(`${p}_PIPELINE_LIMIT`, 0, 0, 1_000_000_000);
  r.ignore(`${p}_PIPELINE_LIMIT`, "deprecated in the reference; sluice batches at most 32 calls per write");
  r.int(`${p}_CLUSTER_PIPELINE_PARALLELISM`, 1, 0, 1_000_000);
  r.ignore(`${p}_CLUSTER_PIPELINE_PARALLELISM`, "sluice sends each cluster node its calls without waiting for other nodes");
  r.durationMs(`${p}_TIMEOUT`, 10_000);
  r.ignore(`${p}_TIMEOUT`, "a store call is bounded by SLUICE_STORE_TIMEOUT_MS (50 ms), then the limit's failure_mode answers");
  const onEmpty = r.str(`${p}_POOL_ON_EMPTY_BEHAVIOR`, "WAIT").toUpperCase();
  if (!["WAIT", "CREATE", "ERROR"].includes(onEmpty)) throw r.error(`${p}_POOL_ON_EMPTY_BEHAVIOR`, "must be WAIT, CREATE or ERROR");
  r.ignore(`${p}_POOL_ON_EMPTY_BEHAVIOR`, "sluice has no connection pool to wait on");
}

/** Startup retries (both stores): checked, not used. */
function readStartup(r: ReferenceReader): void {
  for (const v of ["REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"]) {
    r.durationMs(v, 0);
    r.ignore(v, "sluice starts without waiting for Redis and reconnects within 0.5 s; meanwhile failure_mode answers and /healthcheck fails");
  }
}

type RedisType = "single" | "cluster" | "sentinel";

function redisType(r: ReferenceReader, v: StoreVars): RedisType {
  const t = r.str(`${v.ref}_TYPE`, "SINGLE").toLowerCase();
  if (t !== "single" && t !== "cluster" && t !== "sentinel") throw r.error(`${v.ref}_TYPE`, "must be SINGLE, CLUSTER or SENTINEL");
  return t;
}

/**
 * REDIS_URL in the form REDIS_TYPE and REDIS_SOCKET_TYPE give it -> SLUICE_REDIS, _CLUSTER or _SENTINEL (or
 * the REDIS_PERSECOND_* ones -> SLUICE_REDIS_PER_SECOND*), with the TLS files where its REDIS_TLS is on.
 */
function mapStore(r: ReferenceReader, v: StoreVars, type: RedisType, tls: boolean): void {
  const [URL_VAR, SOCKET_VAR, TYPE_VAR] = refStoreVars(v);
  const TLS_VAR = `${v.ref}_TLS`;
  const socket = r.str(SOCKET_VAR, "unix").toLowerCase();
  if (!["tcp", "tcp4", "tcp6", "unix"].includes(socket)) throw r.error(SOCKET_VAR, "must be tcp or unix");
  const url = r.str(URL_VAR, v.urlDefault);
  if (socket === "unix" && type !== "single") {
    const unixDefault = r.has(SOCKET_VAR) ? "" : " (the reference's default is unix)";
    throw r.error(TYPE_VAR, `needs ${SOCKET_VAR}=tcp${unixDefault}: ${URL_VAR} then lists host:port addresses`);
  }
  if (tls && type !== "single") throw r.error(TLS_VAR, `sluice's ${type === "cluster" ? "Redis Cluster" : "Sentinel"} store connects without TLS`);

  if (type === "cluster") {
    for (const node of url.split(",")) if (!hostPort(node.trim())) throw r.error(URL_VAR, `with ${TYPE_VAR}=cluster takes host:port[,host:port...]`);
    r.map(v.cluster, url);
  } else if (type === "sentinel") {
    let spec;
    try {
      spec = parseReferenceSentinelUrl(url, URL_VAR);
    } catch (err) {
      throw r.error(URL_VAR, (err as Error).message);
    }
    const hosts = spec.sentinels.map((s) => `${s.host.includes(":") ? `[${s.host}]` : s.host}:${s.port}`);
    r.map(v.sentinel, `${spec.name}@${hosts.join(",")}`);
  } else if (socket === "unix") {
    if (tls) throw r.error(TLS_VAR, "sluice does not speak TLS over a unix socket");
    // Go dials a relative socket path from the working directory, as path.resolve does.
    r.map(v.single, "unix://" + pathToFileURL(path.resolve(url)).pathname);
  } else {
    r.map(v.single, singleUrl(r, v, url, tls));
  }
  if (tls && !r.own(undefined, v.tlsCa) && r.has("REDIS_TLS_CACERT")) r.map(v.tlsCa, r.str("REDIS_TLS_CACERT", ""));
  if (tls && r.any("REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY")) {
    if (!r.has("REDIS_TLS_CLIENT_CERT") || !r.has("REDIS_TLS_CLIENT_KEY")) throw r.error("REDIS_TLS_CLIENT_CERT", "and REDIS_TLS_CLIENT_KEY go together");
    if (!r.own(undefined, v.tlsCert) && !r.own(undefined, v.tlsKey)) {
      r.map(v.tlsCert, r.str("REDIS_TLS_CLIENT_CERT", ""));
      r.map(v.tlsKey, r.str("REDIS_TLS_CLIENT_KEY", ""));
    }
  }
}

/** host:port (the reference's form) or a redis:// URL -> a sluice Redis URL; REDIS_TLS makes it rediss://. */
function singleUrl(r: ReferenceReader, v: StoreVars, url: string, tls: boolean): string {
  if (/^rediss?:\/\//.test(url)) return tls ? url.replace(/^redis:/, "rediss:") : url;
  if (!hostPort(url)) throw r.error(`${v.ref}_URL`, `with ${v.ref}_SOCKET_TYPE=tcp takes host:port (or redis://host:port)`);
  return `${tls ? "rediss" : "redis"}://${url}`;
}

function hostPort(s: string): boolean {
  return parseHostPort(s) !== undefined;
}

/** REDIS_AUTH: "password" or "user:password" -> SLUICE_REDIS_USERNAME / SLUICE_REDIS_PASSWORD (REDIS_PERSECOND_AUTH: the per-second ones). */
function mapAuth(r: ReferenceReader, v: StoreVars): void {
  const AUTH = `${v.ref}_AUTH`;
  if (!r.has(AUTH)) return;
  if (v.ownCredentials.some(([flag, env]) => r.own(flag, env))) {
    r.ignore(AUTH, `sluice's own ${v.label} credentials (${v.password}, _PASSWORD_FILE or _USERNAME) are given and win`);
    return;
  }
  const { user, password } = splitAuth(r.str(AUTH, ""));
  if (user) r.map(v.username, user);
  r.map(v.password, password);
}

function mapSentinelAuth(r: ReferenceReader, v: StoreVars): void {
  const AUTH = `${v.ref}_SENTINEL_AUTH`;
  if (!r.has(AUTH)) return;
  if (v.ownSentinelCredentials.some((name) => r.own(undefined, name))) {
    r.ignore(AUTH, `sluice's own ${v.sentinelLabel} credentials (${v.sentinelPassword}, _PASSWORD_FILE or _USERNAME) are given and win`);
    return;
  }
  const { user, password } = splitAuth(r.str(AUTH, ""));
  if (user) r.map(v.sentinelUsername, user);
  r.map(v.sentinelPassword, password);
}

/** As the reference: split at the first ':' (user:password), else the whole value is the password. */
function splitAuth(auth: string): { user?: string; password: string } {
  const colon = auth.indexOf(":");
  if (colon < 0) return { password: auth };
  return { user: auth.slice(0, colon) || undefined, password: auth.slice(colon + 1) };
}
