// The CLI's flags, one definition each (parseArgs's fields, and what `--help` and docs/configuration.md's
// flag table show), and parsing them. What a parsed flag means is settings.ts's.
import { ENV } from "./core/setting-names.js";
import { parseArgs } from "node:util";
import { UsageError } from "./core/usage-error.js";
import { DEFAULT_APPROXIMATE_MAX_KEYS } from "./approximate/leases.js";
import { DEFAULT_BREAKER_THRESHOLD, DEFAULT_PROBE_INTERVAL_MS } from "./store/breaker.js";
import { DEFAULT_DENY_NOTE_MAX_ENTRIES, DEFAULT_DENY_NOTE_MAX_MS } from "./limiter/deny-note.js";
import { DEFAULT_LOCAL_MAX_KEYS } from "./limiter/limiter.js";
import { DEFAULT_MEMORY_MAX_KEYS } from "./store/memory.js";
import { DETAILED_VALUES_PER_RULE } from "./telemetry/rule-counters.js";
import { DEFAULT_MAX_CONCURRENT_STREAMS, DEFAULT_MAX_CONNECTIONS } from "./server/grpc-contract.js";

/**
 * One flag of the CLI: parseArgs's fields (type, short, multiple) and what `--help` and the docs' flag
 * table show: the argument's name, the SLUICE_* variable that stands for it, the default and a line of help.
 * test/unit/docs-configuration.test.ts holds docs/configuration.md's table to these.
 */
export interface FlagSpec {
  type: "string" | "boolean";
  short?: string;
  multiple?: boolean;
  arg?: string;
  env?: string;
  /** As the docs' default column shows it (not parseArgs's `default`: sluice applies defaults after the environment). */
  defaultText: string;
  help: string;
}

// Defaults of the flags below: one value each for the flag table (defaultText) and for parsing.
export const DEFAULT_PORT = 8081;
export const DEFAULT_HOST = "0.0.0.0";
export const DEFAULT_ADMIN_PORT = 8080;
export const DEFAULT_ADMIN_HOST = "127.0.0.1";
export const DEFAULT_WORKERS = 1;
export const DEFAULT_LOG_LEVEL = "info";

const CONFIG_FLAG = {
  type: "string",
  arg: "DIR",
  env: ENV.CONFIG,
  defaultText: "`./config`",
  help: "rule directory (its top-level *.yaml and *.yml files)",
} as const;
const MERGE_DOMAINS_FLAG = {
  type: "boolean",
  env: ENV.MERGE_DOMAINS,
  defaultText: "off",
  help: "merge the same domain from several files (else an error)",
} as const;
const KEY_PREFIX_FLAG = {
  type: "string",
  arg: "PREFIX",
  env: ENV.KEY_PREFIX,
  defaultText: "none",
  help: "starts every store key, so deployments can share one Redis",
} as const;
const FAILURE_MODE_FLAG = {
  type: "string",
  arg: "MODE",
  env: ENV.FAILURE_MODE,
  defaultText: "`allow`",
  help: "what a limit whose rules name no failure_mode does when its store fails: allow, deny, local or error",
} as const;
const ALLOW_EMPTY_RULES_FLAG = {
  type: "boolean",
  env: ENV.ALLOW_EMPTY_RULES,
  defaultText: "off",
  help: "accept a rule directory that is empty or missing (no limits until rule files appear)",
} as const;
const HELP_FLAG = { type: "boolean", short: "h", defaultText: "—", help: "print this help and exit" } as const;

export const SERVE_FLAGS = {
  config: CONFIG_FLAG,
  "config-xds": {
    type: "string",
    arg: "HOST:PORT",
    env: ENV.CONFIG_XDS,
    defaultText: "none",
    help: "rules from a control plane (ADS, RateLimitConfig resources) instead of a directory",
  },
  redis: {
    type: "string",
    arg: "URL[,URL...]",
    env: ENV.REDIS,
    defaultText: "none",
    help: "Redis server(s), several = shards; none = the embedded memory store",
  },
  port: { type: "string", arg: "N", env: ENV.PORT, defaultText: `\`${DEFAULT_PORT}\``, help: "gRPC port (0 = a free one)" },
  host: { type: "string", arg: "ADDR", env: ENV.HOST, defaultText: `\`${DEFAULT_HOST}\``, help: "gRPC bind address" },
  "max-connections": {
    type: "string",
    arg: "N",
    env: ENV.MAX_CONNECTIONS,
    defaultText: `\`${DEFAULT_MAX_CONNECTIONS}\``,
    help: "open gRPC connections per process; a new one past it is closed at once",
  },
  "merge-domains": MERGE_DOMAINS_FLAG,
  "admin-port": {
    type: "string",
    arg: "N",
    env: ENV.ADMIN_PORT,
    defaultText: `\`${DEFAULT_ADMIN_PORT}\``,
    help: "admin HTTP port: /healthz, /readyz, /metrics, /rules (0 = a free one)",
  },
  "admin-host": { type: "string", arg: "ADDR", env: ENV.ADMIN_HOST, defaultText: `\`${DEFAULT_ADMIN_HOST}\``, help: "admin bind address" },
  "redis-cluster": {
    type: "string",
    arg: "HOST:PORT[,...]",
    env: ENV.REDIS_CLUSTER,
    defaultText: "none",
    help: "startup nodes of a Redis Cluster (instead of --redis)",
  },
  "redis-sentinel": {
    type: "string",
    arg: "MASTER@HOST:PORT[,...]",
    env: ENV.REDIS_SENTINEL,
    defaultText: "none",
    help: "a master behind Redis Sentinel (instead of --redis)",
  },
  "redis-per-second": {
    type: "string",
    arg: "URL[,URL...]",
    env: ENV.REDIS_PER_SECOND,
    defaultText: "none",
    help: "a second Redis for limits whose unit is second",
  },
  "redis-per-second-cluster": {
    type: "string",
    arg: "HOST:PORT[,...]",
    env: ENV.REDIS_PER_SECOND_CLUSTER,
    defaultText: "none",
    help: "the per-second store as a Redis Cluster",
  },
  "redis-per-second-sentinel": {
    type: "string",
    arg: "MASTER@HOST:PORT[,...]",
    env: ENV.REDIS_PER_SECOND_SENTINEL,
    defaultText: "none",
    help: "the per-second store behind Redis Sentinel",
  },
  "tls-cert": { type: "string", arg: "FILE", env: ENV.TLS_CERT, defaultText: "none", help: "PEM certificate of the gRPC server: TLS on (with --tls-key)" },
  "tls-key": { type: "string", arg: "FILE", env: ENV.TLS_KEY, defaultText: "none", help: "PEM private key of that certificate" },
  "tls-ca": {
    type: "string",
    arg: "FILE",
    env: ENV.TLS_CA,
    defaultText: "none",
    help: "PEM CA bundle: clients must present a certificate it signed (mTLS)",
  },
  "redis-password-file": {
    type: "string",
    arg: "FILE",
    env: ENV.REDIS_PASSWORD_FILE,
    defaultText: "none",
    help: "Redis AUTH password, read from this file",
  },
  workers: { type: "string", arg: "N", env: ENV.WORKERS, defaultText: `\`${DEFAULT_WORKERS}\``, help: "processes serving the port (1 to 64)" },
  "log-level": {
    type: "string",
    arg: "LEVEL",
    env: ENV.LOG_LEVEL,
    defaultText: `\`${DEFAULT_LOG_LEVEL}\``,
    help: "fatal, error, warn, info, debug, trace or silent",
  },
  "key-prefix": KEY_PREFIX_FLAG,
  tracing: {
    type: "string",
    arg: "MODE",
    env: ENV.TRACING,
    defaultText: "`off`",
    help: "otlp: a span per ShouldRateLimit call, exported over OTLP (OTEL_EXPORTER_OTLP_* variables)",
  },
  "failure-mode": FAILURE_MODE_FLAG,
  "allow-empty-rules": ALLOW_EMPTY_RULES_FLAG,
  help: HELP_FLAG,
} as const satisfies Record<string, FlagSpec>;

/** Flags of `sluice check [DIR]`. */
export const CHECK_FLAGS = {
  config: CONFIG_FLAG,
  "merge-domains": MERGE_DOMAINS_FLAG,
  "allow-empty-rules": ALLOW_EMPTY_RULES_FLAG,
  help: HELP_FLAG,
} as const satisfies Record<string, FlagSpec>;

/** Flags of `sluice explain`. */
export const EXPLAIN_FLAGS = {
  config: CONFIG_FLAG,
  domain: { type: "string", arg: "D", defaultText: "required", help: "the request's domain" },
  descriptor: {
    type: "string",
    multiple: true,
    arg: "k=v[,k=v...]",
    defaultText: "required, repeatable",
    help: "one descriptor of the request, entries in order (\\ escapes , = \\)",
  },
  at: { type: "string", arg: "TIME", defaultText: "now", help: "the time quota keys are shown for (ISO 8601)" },
  "merge-domains": MERGE_DOMAINS_FLAG,
  "key-prefix": KEY_PREFIX_FLAG,
  "allow-empty-rules": ALLOW_EMPTY_RULES_FLAG,
  help: HELP_FLAG,
} as const satisfies Record<string, FlagSpec>;

/** Flags of `sluice top` (insight/top-command.ts). */
export const TOP_FLAGS = {
  admin: { type: "string", arg: "HOST:PORT", defaultText: `\`${DEFAULT_ADMIN_HOST}:${DEFAULT_ADMIN_PORT}\``, help: "the admin address of the sluice to watch" },
  window: { type: "string", arg: "WINDOW", defaultText: "`1m`", help: "1m or 1h: refusals over the last minute or the last hour" },
  rule: { type: "string", arg: "RULE", defaultText: "the most refusing", help: "the rule whose most refused clients are shown (e.g. edge.remote_address)" },
  clients: { type: "string", arg: "N", defaultText: "`5`", help: "most refused clients shown" },
  once: { type: "boolean", defaultText: "off", help: "print one view and exit" },
  json: { type: "boolean", defaultText: "off", help: "print /top's JSON once and exit" },
  help: HELP_FLAG,
} as const satisfies Record<string, FlagSpec>;

/** Every command's flags, for usage and for the docs' flag table test. */
export const COMMAND_FLAGS: Record<string, Record<string, FlagSpec>> = {
  serve: SERVE_FLAGS,
  check: CHECK_FLAGS,
  explain: EXPLAIN_FLAGS,
  top: TOP_FLAGS,
};

/** Parses one command's flags; a flag it does not take or a missing value is a usage error. */
export function parseFlags<F extends Record<string, FlagSpec>>(flags: F, args: string[], allowPositionals = false) {
  try {
    return parseArgs({ args, options: flags, strict: true, allowPositionals });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** The flags and SLUICE_* variables of one Redis store (settings.ts reads them, compat/ref-redis.ts maps onto them). */
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
  flag: "redis",
  env: ENV.REDIS,
  clusterFlag: "redis-cluster",
  clusterEnv: ENV.REDIS_CLUSTER,
  sentinelFlag: "redis-sentinel",
  sentinelEnv: ENV.REDIS_SENTINEL,
  username: ENV.REDIS_USERNAME,
  password: ENV.REDIS_PASSWORD,
  passwordFile: ENV.REDIS_PASSWORD_FILE,
  passwordFileFlag: "redis-password-file",
  tlsCa: ENV.REDIS_TLS_CA,
  tlsCert: ENV.REDIS_TLS_CERT,
  tlsKey: ENV.REDIS_TLS_KEY,
  sentinelUsername: ENV.REDIS_SENTINEL_USERNAME,
  sentinelPassword: ENV.REDIS_SENTINEL_PASSWORD,
  sentinelPasswordFile: ENV.REDIS_SENTINEL_PASSWORD_FILE,
};

export const PER_SECOND_STORE: StoreNames = {
  label: "per-second Redis",
  flag: "redis-per-second",
  env: ENV.REDIS_PER_SECOND,
  clusterFlag: "redis-per-second-cluster",
  clusterEnv: ENV.REDIS_PER_SECOND_CLUSTER,
  sentinelFlag: "redis-per-second-sentinel",
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

/** A whole-number setting with only a SLUICE_* variable: its name, default and range, written here once. */
export interface IntSetting {
  env: string;
  default: number;
  min: number;
  max: number;
}

/**
 * The whole-number settings without a flag (settings.ts reads each through its entry; docs/configuration.md's
 * default column is checked against `default` by test/unit/docs-configuration.test.ts).
 */
export const INT_SETTINGS = {
  STORE_TIMEOUT_MS: { env: ENV.STORE_TIMEOUT_MS, default: 50, min: 1, max: 60_000 },
  SHUTDOWN_GRACE_MS: { env: ENV.SHUTDOWN_GRACE_MS, default: 5000, min: 0, max: 600_000 },
  CIRCUIT_FAILURES: { env: ENV.CIRCUIT_FAILURES, default: DEFAULT_BREAKER_THRESHOLD, min: 1, max: 1000 },
  CIRCUIT_PROBE_MS: { env: ENV.CIRCUIT_PROBE_MS, default: DEFAULT_PROBE_INTERVAL_MS, min: 10, max: 60_000 },
  DENY_NOTE_MAX: { env: ENV.DENY_NOTE_MAX, default: DEFAULT_DENY_NOTE_MAX_ENTRIES, min: 0, max: 10_000_000 },
  DENY_NOTE_MAX_MS: { env: ENV.DENY_NOTE_MAX_MS, default: DEFAULT_DENY_NOTE_MAX_MS, min: 1, max: 3_600_000 },
  LOCAL_MAX_KEYS: { env: ENV.LOCAL_MAX_KEYS, default: DEFAULT_LOCAL_MAX_KEYS, min: 1, max: 10_000_000 },
  APPROXIMATE_MAX_KEYS: { env: ENV.APPROXIMATE_MAX_KEYS, default: DEFAULT_APPROXIMATE_MAX_KEYS, min: 1, max: 10_000_000 },
  RELOAD_INTERVAL_S: { env: ENV.RELOAD_INTERVAL_S, default: 30, min: 0, max: 86_400 },
  DETAILED_METRIC_MAX_VALUES: { env: ENV.DETAILED_METRIC_MAX_VALUES, default: DETAILED_VALUES_PER_RULE, min: 1, max: 10_000 },
  MAX_DESCRIPTORS: { env: ENV.MAX_DESCRIPTORS, default: 64, min: 1, max: 10_000 },
  MAX_ENTRIES: { env: ENV.MAX_ENTRIES, default: 32, min: 1, max: 10_000 },
  MAX_KEY_LENGTH: { env: ENV.MAX_KEY_LENGTH, default: 1024, min: 1, max: 1 << 20 },
  MAX_VALUE_LENGTH: { env: ENV.MAX_VALUE_LENGTH, default: 131_072, min: 1, max: 64 << 20 },
  MAX_MESSAGE_BYTES: { env: ENV.MAX_MESSAGE_BYTES, default: 1 << 20, min: 64, max: 64 << 20 },
  MAX_CONCURRENT_STREAMS: { env: ENV.MAX_CONCURRENT_STREAMS, default: DEFAULT_MAX_CONCURRENT_STREAMS, min: 1, max: 1_000_000 },
  MAX_CONNECTION_AGE_MS: { env: ENV.MAX_CONNECTION_AGE_MS, default: 0, min: 0, max: 365 * 86_400_000 },
  MAX_CONNECTION_AGE_GRACE_MS: { env: ENV.MAX_CONNECTION_AGE_GRACE_MS, default: 3_600_000, min: 0, max: 365 * 86_400_000 },
  MEMORY_MAX_KEYS: { env: ENV.MEMORY_MAX_KEYS, default: DEFAULT_MEMORY_MAX_KEYS, min: 1, max: 100_000_000 },
  TLS_RELOAD_MS: { env: ENV.TLS_RELOAD_MS, default: 5000, min: 10, max: 3_600_000 },
} as const satisfies Record<string, IntSetting>;
