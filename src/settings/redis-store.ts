// One Redis store's settings from its flags and SLUICE_* variables: the main store and the one for per-second
// limits (docs/configuration.md, the Redis flags). The reference's REDIS_* variables are mapped onto these names
// (reference/redis.ts) before they are read here.
import { ENV, SETTINGS } from "../core/settings-table.js";
import { parseHostPort } from "../core/host-port.js";
import { UsageError } from "../core/usage-error.js";
import { Secret } from "../core/secret.js";
import { RedisOptionsError, type RedisAuth } from "../store/redis-options.js";
import { parseSentinelSpec, type SentinelSpec } from "../store/redis-sentinel.js";
import type { RedisStoreSpec } from "../store/make-redis-store.js";

/** The flags and SLUICE_* variables of one Redis store (read here; reference/redis.ts maps the reference's onto them). */
export interface StoreNames {
  /** Names the store in messages. */
  label: string;
  flag: string;
  env: string;
  clusterFlag: string;
  clusterEnv: string;
  sentinelFlag: string;
  sentinelEnv: string;
  username: string;
  password: string;
  passwordFile: string;
  passwordFileFlag?: string;
  tlsCa: string;
  tlsCert: string;
  tlsKey: string;
  sentinelUsername: string;
  sentinelPassword: string;
  sentinelPasswordFile: string;
}

export const MAIN_STORE: StoreNames = {
  label: "Redis",
  flag: SETTINGS.REDIS.flag,
  env: ENV.REDIS,
  clusterFlag: SETTINGS.REDIS_CLUSTER.flag,
  clusterEnv: ENV.REDIS_CLUSTER,
  sentinelFlag: SETTINGS.REDIS_SENTINEL.flag,
  sentinelEnv: ENV.REDIS_SENTINEL,
  username: ENV.REDIS_USERNAME,
  password: ENV.REDIS_PASSWORD,
  passwordFile: ENV.REDIS_PASSWORD_FILE,
  passwordFileFlag: SETTINGS.REDIS_PASSWORD_FILE.flag,
  tlsCa: ENV.REDIS_TLS_CA,
  tlsCert: ENV.REDIS_TLS_CERT,
  tlsKey: ENV.REDIS_TLS_KEY,
  sentinelUsername: ENV.REDIS_SENTINEL_USERNAME,
  sentinelPassword: ENV.REDIS_SENTINEL_PASSWORD,
  sentinelPasswordFile: ENV.REDIS_SENTINEL_PASSWORD_FILE,
};

export const PER_SECOND_STORE: StoreNames = {
  label: "per-second Redis",
  flag: SETTINGS.REDIS_PER_SECOND.flag,
  env: ENV.REDIS_PER_SECOND,
  clusterFlag: SETTINGS.REDIS_PER_SECOND_CLUSTER.flag,
  clusterEnv: ENV.REDIS_PER_SECOND_CLUSTER,
  sentinelFlag: SETTINGS.REDIS_PER_SECOND_SENTINEL.flag,
  sentinelEnv: ENV.REDIS_PER_SECOND_SENTINEL,
  username: ENV.REDIS_PER_SECOND_USERNAME,
  password: ENV.REDIS_PER_SECOND_PASSWORD,
  passwordFile: ENV.REDIS_PER_SECOND_PASSWORD_FILE,
  tlsCa: ENV.REDIS_PER_SECOND_TLS_CA,
  tlsCert: ENV.REDIS_PER_SECOND_TLS_CERT,
  tlsKey: ENV.REDIS_PER_SECOND_TLS_KEY,
  sentinelUsername: ENV.REDIS_PER_SECOND_SENTINEL_USERNAME,
  sentinelPassword: ENV.REDIS_PER_SECOND_SENTINEL_PASSWORD,
  sentinelPasswordFile: ENV.REDIS_PER_SECOND_SENTINEL_PASSWORD_FILE,
};

/** One Redis store from its flags and variables: at most one of URLs, cluster or sentinel, and credentials. */
export function redisStoreSettings(values: Record<string, unknown>, env: NodeJS.ProcessEnv, n: StoreNames): RedisStoreSpec {
  const flag = (name: string | undefined) => (name && typeof values[name] === "string" ? (values[name] as string) : undefined);
  const urls = redisUrlList(flag(n.flag) ?? env[n.env] ?? "", n.flag);
  const cluster = clusterNodes(flag(n.clusterFlag) ?? env[n.clusterEnv] ?? "", n.clusterFlag);
  const { sentinel, sentinelAuth } = sentinelSettings(flag(n.sentinelFlag) ?? env[n.sentinelEnv], env, n);
  const stores = [urls.length > 0 && `--${n.flag}`, cluster.length > 0 && `--${n.clusterFlag}`, sentinel && `--${n.sentinelFlag}`].filter((f) => f);
  if (stores.length > 1) throw new UsageError(`${stores.join(" and ")} cannot be used together: give one ${n.label} store`);
  const auth = redisAuthSettings(env, n, flag(n.passwordFileFlag));
  if (sentinel && auth.tlsCaFile) throw new UsageError(`${n.tlsCa}: TLS is not supported with --${n.sentinelFlag}`);
  return { urls, cluster, sentinel, auth, sentinelAuth };
}

/** The store for per-second limits, if one is given: it needs a main Redis (else every limit is in memory). */
export function perSecondSettings(values: Record<string, unknown>, env: NodeJS.ProcessEnv, main: RedisStoreSpec): RedisStoreSpec | undefined {
  const n = PER_SECOND_STORE;
  const spec = redisStoreSettings(values, env, n);
  if (spec.urls.length === 0 && spec.cluster.length === 0 && !spec.sentinel) {
    const given = [n.username, n.password, n.passwordFile, n.tlsCa, n.tlsCert, n.tlsKey].filter((v) => env[v]);
    if (given.length > 0) {
      throw new UsageError(`${given.join(" and ")} ${given.length === 1 ? "needs" : "need"} --${n.flag}, --${n.clusterFlag} or --${n.sentinelFlag}`);
    }
    return undefined;
  }
  if (main.urls.length === 0 && main.cluster.length === 0 && !main.sentinel) {
    throw new UsageError(
      `--${n.flag} (or --${n.clusterFlag}, --${n.sentinelFlag}) needs the main Redis store too: --redis, --redis-cluster or --redis-sentinel`,
    );
  }
  return spec;
}

/** URL[,URL...] of --redis (or --redis-per-second): single servers, several = shards. */
function redisUrlList(raw: string, flag: string): string[] {
  const urls = raw
    .split(",")
    .map((u) => u.trim())
    .filter((u) => u !== "");
  for (const url of urls) {
    if (!/^(rediss?:\/\/[^/]|unix:\/\/\/)/.test(url) || !URL.canParse(url)) {
      throw new UsageError(`--${flag} must be a URL like redis://host:port[/db] or unix:///path/to/redis.sock (several: comma-separated), got '${url}'`);
    }
  }
  if (new Set(urls).size !== urls.length) throw new UsageError(`--${flag} lists the same server twice`);
  return urls;
}

/** Redis credentials and TLS trust of one store; the password is a Secret, never printed. */
function redisAuthSettings(env: NodeJS.ProcessEnv, n: StoreNames, passwordFileFlag: string | undefined): RedisAuth {
  const passwordFile = passwordFileFlag ?? env[n.passwordFile];
  const password = env[n.password];
  if (passwordFile && password) {
    throw new UsageError(`give the ${n.label} password once: ${n.password} or ${n.passwordFileFlag ? `--${n.passwordFileFlag}` : n.passwordFile}, not both`);
  }
  const auth: RedisAuth = {
    username: env[n.username] || undefined,
    password: password ? new Secret(password) : undefined,
    passwordFile: passwordFile || undefined,
    tlsCaFile: env[n.tlsCa] || undefined,
    tlsCertFile: env[n.tlsCert] || undefined,
    tlsKeyFile: env[n.tlsKey] || undefined,
  };
  if (!auth.tlsCertFile !== !auth.tlsKeyFile) throw new UsageError(`${n.tlsCert} and ${n.tlsKey} go together`);
  return auth;
}

/** host:port,host:port -> startup nodes of a Redis Cluster. */
function clusterNodes(raw: string, flag: string): { host: string; port: number }[] {
  const out: { host: string; port: number }[] = [];
  for (const part of raw
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")) {
    const addr = parseHostPort(part);
    if (!addr) throw new UsageError(`--${flag} takes host:port[,host:port...], got '${part}'`);
    out.push(addr);
  }
  return out;
}

/**
 * --redis-sentinel MASTER@host:port[,host:port...] and the sentinels' own credentials
 * (SLUICE_REDIS_SENTINEL_USERNAME, SLUICE_REDIS_SENTINEL_PASSWORD or ..._PASSWORD_FILE; the master's are --redis's),
 * or the same of the per-second store.
 */
function sentinelSettings(raw: string | undefined, env: NodeJS.ProcessEnv, n: StoreNames): { sentinel?: SentinelSpec; sentinelAuth: RedisAuth } {
  let sentinel: SentinelSpec | undefined;
  if (raw !== undefined && raw.trim() !== "") {
    try {
      sentinel = parseSentinelSpec(raw.trim(), `--${n.sentinelFlag}`);
    } catch (err) {
      if (err instanceof RedisOptionsError) throw new UsageError(err.message, `--${n.sentinelFlag}`);
      throw err;
    }
  }
  const username = env[n.sentinelUsername] || undefined;
  const password = env[n.sentinelPassword] || undefined;
  const passwordFile = env[n.sentinelPasswordFile] || undefined;
  if (password && passwordFile) {
    throw new UsageError(`give the ${n.label} Sentinel password once: ${n.sentinelPassword} or ${n.sentinelPasswordFile}, not both`);
  }
  const given = [username && n.sentinelUsername, password && n.sentinelPassword, passwordFile && n.sentinelPasswordFile].filter((g) => g);
  if (!sentinel && given.length > 0) throw new UsageError(`${given.join(" and ")} ${given.length === 1 ? "needs" : "need"} --${n.sentinelFlag}`);
  const sentinelAuth: RedisAuth = {};
  if (username) sentinelAuth.username = username;
  if (password) sentinelAuth.password = new Secret(password);
  if (passwordFile) sentinelAuth.passwordFile = passwordFile;
  return { sentinel, sentinelAuth };
}
