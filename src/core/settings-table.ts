// Every setting of sluice, one entry each: its SLUICE_* variable, the flag that stands for it and the commands
// that take the flag, the reference's variable that maps onto it, its default, its range or values, and a
// line of help. The flag parser and `--help` (settings/flags.ts, settings/usage.ts), the readers (settings/,
// telemetry/, xds/) and the modules whose defaults these are read it from here;
// test/unit/docs-configuration.test.ts holds docs/configuration.md's tables to it, and
// test/unit/settings-names.test.ts holds every SLUICE_* name and default of src/ to this file.
import { UsageError } from "./usage-error.js";

export type Command = "serve" | "check" | "explain";

interface SettingBase {
  env: string;
  help: string;
  /** The flag (without `--`) that stands for the variable and wins over it; absent = the variable only. */
  flag?: string;
  /** The flag's argument as `--help` shows it; absent with a flag = a flag without a value (on/off). */
  arg?: string;
  /** The commands that take the flag (or read the variable); absent = serve. */
  commands?: readonly Command[];
  /** The envoyproxy/ratelimit variable settings/reference/ maps onto this one (docs/configuration.md's reference table names it). */
  reference?: string;
  /** The docs' default column where the value alone does not say it. */
  defaultText?: string;
}
interface IntSetting extends SettingBase {
  kind: "int";
  default: number;
  min: number;
  max: number;
}
interface NumberSetting extends SettingBase {
  kind: "number";
  default: number;
}
interface TextSetting extends SettingBase {
  kind: "text";
  default?: string;
  choices?: readonly string[];
}
interface ListSetting extends SettingBase {
  kind: "list";
  default?: readonly string[];
}
/** Yes/no (readBool): off unless set, or its default. */
interface BoolSetting extends SettingBase {
  kind: "bool";
  default?: boolean;
}
/** A path, a secret, an address or URLs: no default (absent = not used); their readers check them. */
interface ValueSetting extends SettingBase {
  kind: "file" | "secret" | "address" | "url";
  default?: string;
}
export type Setting = IntSetting | NumberSetting | TextSetting | ListSetting | BoolSetting | ValueSetting;

const MAX_AGE_MS = 365 * 86_400_000;

export const SETTINGS = {
  // --- With a flag, in the order `serve --help` lists them.
  CONFIG: {
    env: "SLUICE_CONFIG",
    flag: "config",
    arg: "DIR",
    commands: ["serve", "check", "explain"],
    kind: "text",
    default: "config",
    defaultText: "`./config`",
    help: "rule directory (its top-level *.yaml and *.yml files)",
  },
  CONFIG_XDS: {
    env: "SLUICE_CONFIG_XDS",
    flag: "config-xds",
    arg: "HOST:PORT",
    kind: "address",
    reference: "CONFIG_GRPC_XDS_SERVER_URL",
    help: "rules from a control plane (ADS, RateLimitConfig resources) instead of a directory",
  },
  REDIS: { env: "SLUICE_REDIS", flag: "redis", arg: "URL[,URL...]", kind: "url", help: "Redis server(s), several = shards; none = the embedded memory store" },
  PORT: { env: "SLUICE_PORT", flag: "port", arg: "N", kind: "int", default: 8081, min: 0, max: 65535, help: "gRPC port (0 = a free one)" },
  HOST: { env: "SLUICE_HOST", flag: "host", arg: "ADDR", kind: "text", default: "0.0.0.0", help: "gRPC bind address" },
  MAX_CONNECTIONS: {
    env: "SLUICE_MAX_CONNECTIONS",
    flag: "max-connections",
    arg: "N",
    kind: "int",
    default: 4096,
    min: 1,
    max: 1_000_000,
    help: "open gRPC connections per process; a new one past it is closed at once",
  },
  MERGE_DOMAINS: {
    env: "SLUICE_MERGE_DOMAINS",
    flag: "merge-domains",
    commands: ["serve", "check", "explain"],
    kind: "bool",
    help: "merge the same domain from several files (else an error)",
  },
  ADMIN_PORT: {
    env: "SLUICE_ADMIN_PORT",
    flag: "admin-port",
    arg: "N",
    kind: "int",
    default: 8080,
    min: 0,
    max: 65535,
    defaultText: "`8080`; `8082` under the reference's environment",
    help: "admin HTTP port: /healthz, /readyz, /metrics, /rules, /top, /ui, /explain (0 = a free one; 8082 under the reference's environment)",
  },
  ADMIN_HOST: { env: "SLUICE_ADMIN_HOST", flag: "admin-host", arg: "ADDR", kind: "text", default: "127.0.0.1", help: "admin bind address" },
  REDIS_CLUSTER: {
    env: "SLUICE_REDIS_CLUSTER",
    flag: "redis-cluster",
    arg: "HOST:PORT[,...]",
    kind: "address",
    help: "startup nodes of a Redis Cluster (instead of --redis)",
  },
  REDIS_SENTINEL: {
    env: "SLUICE_REDIS_SENTINEL",
    flag: "redis-sentinel",
    arg: "MASTER@HOST:PORT[,...]",
    kind: "address",
    help: "a master behind Redis Sentinel (instead of --redis)",
  },
  REDIS_PER_SECOND: {
    env: "SLUICE_REDIS_PER_SECOND",
    flag: "redis-per-second",
    arg: "URL[,URL...]",
    kind: "url",
    help: "a second Redis for limits whose unit is second",
  },
  REDIS_PER_SECOND_CLUSTER: {
    env: "SLUICE_REDIS_PER_SECOND_CLUSTER",
    flag: "redis-per-second-cluster",
    arg: "HOST:PORT[,...]",
    kind: "address",
    help: "the per-second store as a Redis Cluster",
  },
  REDIS_PER_SECOND_SENTINEL: {
    env: "SLUICE_REDIS_PER_SECOND_SENTINEL",
    flag: "redis-per-second-sentinel",
    arg: "MASTER@HOST:PORT[,...]",
    kind: "address",
    help: "the per-second store behind Redis Sentinel",
  },
  TLS_CERT: { env: "SLUICE_TLS_CERT", flag: "tls-cert", arg: "FILE", kind: "file", help: "PEM certificate of the gRPC server: TLS on (with --tls-key)" },
  TLS_KEY: { env: "SLUICE_TLS_KEY", flag: "tls-key", arg: "FILE", kind: "file", help: "PEM private key of that certificate" },
  TLS_CA: { env: "SLUICE_TLS_CA", flag: "tls-ca", arg: "FILE", kind: "file", help: "PEM CA bundle: clients must present a certificate it signed (mTLS)" },
  REDIS_PASSWORD_FILE: {
    env: "SLUICE_REDIS_PASSWORD_FILE",
    flag: "redis-password-file",
    arg: "FILE",
    kind: "file",
    help: "Redis AUTH password, read from this file",
  },
  WORKERS: { env: "SLUICE_WORKERS", flag: "workers", arg: "N", kind: "int", default: 1, min: 1, max: 64, help: "processes serving the port (1 to 64)" },
  LOG_LEVEL: {
    env: "SLUICE_LOG_LEVEL",
    flag: "log-level",
    arg: "LEVEL",
    kind: "text",
    default: "info",
    choices: ["fatal", "error", "warn", "info", "debug", "trace", "silent"],
    reference: "LOG_LEVEL",
    help: "fatal, error, warn, info, debug, trace or silent",
  },
  KEY_PREFIX: {
    env: "SLUICE_KEY_PREFIX",
    flag: "key-prefix",
    arg: "PREFIX",
    commands: ["serve", "explain"],
    kind: "text",
    reference: "CACHE_KEY_PREFIX",
    help: "starts every store key, so deployments can share one Redis",
  },
  TRACING: {
    env: "SLUICE_TRACING",
    flag: "tracing",
    arg: "MODE",
    kind: "text",
    default: "off",
    choices: ["off", "otlp"],
    reference: "TRACING_ENABLED",
    help: "otlp: a span per ShouldRateLimit call, exported over OTLP (OTEL_EXPORTER_OTLP_* variables)",
  },
  FAILURE_MODE: {
    env: "SLUICE_FAILURE_MODE",
    flag: "failure-mode",
    arg: "MODE",
    kind: "text",
    default: "allow",
    choices: ["allow", "deny", "local", "error"],
    help: "what a limit whose rules name no failure_mode does when its store fails: allow, deny, local or error",
  },
  ALLOW_EMPTY_RULES: {
    env: "SLUICE_ALLOW_EMPTY_RULES",
    flag: "allow-empty-rules",
    commands: ["serve", "check", "explain"],
    kind: "bool",
    help: "accept a rule directory that is empty or missing (no limits until rule files appear)",
  },

  // --- The store: timeouts, the circuit, credentials of the main and the per-second store, reference keys.
  STORE_TIMEOUT_MS: {
    env: "SLUICE_STORE_TIMEOUT_MS",
    kind: "int",
    default: 50,
    min: 1,
    max: 60_000,
    reference: "REDIS_TIMEOUT",
    help: "a store node silent this long while a call waits has failed",
  },
  CIRCUIT_FAILURES: {
    env: "SLUICE_CIRCUIT_FAILURES",
    kind: "int",
    default: 3,
    min: 1,
    max: 1000,
    help: "store calls failing in a row that open a node's circuit",
  },
  CIRCUIT_PROBE_MS: {
    env: "SLUICE_CIRCUIT_PROBE_MS",
    kind: "int",
    default: 250,
    min: 10,
    max: 60_000,
    help: "time between probes of a node whose circuit is open",
  },
  REFERENCE_KEYS: {
    env: "SLUICE_REFERENCE_KEYS",
    kind: "bool",
    defaultText: "off; on under the reference's environment",
    help: "fixed windows count in envoyproxy/ratelimit's keys, as it counts",
  },
  REDIS_PASSWORD: { env: "SLUICE_REDIS_PASSWORD", kind: "secret", reference: "REDIS_AUTH", help: "Redis AUTH password" },
  REDIS_USERNAME: { env: "SLUICE_REDIS_USERNAME", kind: "text", help: "Redis ACL user" },
  REDIS_TLS_CA: { env: "SLUICE_REDIS_TLS_CA", kind: "file", reference: "REDIS_TLS_CACERT", help: "PEM CA that signs the Redis server's certificate" },
  REDIS_TLS_CERT: { env: "SLUICE_REDIS_TLS_CERT", kind: "file", reference: "REDIS_TLS_CLIENT_CERT", help: "PEM client certificate for Redis" },
  REDIS_TLS_KEY: { env: "SLUICE_REDIS_TLS_KEY", kind: "file", reference: "REDIS_TLS_CLIENT_KEY", help: "PEM private key of that client certificate" },
  REDIS_SENTINEL_PASSWORD: { env: "SLUICE_REDIS_SENTINEL_PASSWORD", kind: "secret", reference: "REDIS_SENTINEL_AUTH", help: "password of the sentinels" },
  REDIS_SENTINEL_PASSWORD_FILE: { env: "SLUICE_REDIS_SENTINEL_PASSWORD_FILE", kind: "file", help: "password of the sentinels, read from this file" },
  REDIS_SENTINEL_USERNAME: { env: "SLUICE_REDIS_SENTINEL_USERNAME", kind: "text", help: "ACL user on the sentinels" },
  REDIS_PER_SECOND_PASSWORD: {
    env: "SLUICE_REDIS_PER_SECOND_PASSWORD",
    kind: "secret",
    reference: "REDIS_PERSECOND_AUTH",
    help: "AUTH password of the per-second store",
  },
  REDIS_PER_SECOND_PASSWORD_FILE: { env: "SLUICE_REDIS_PER_SECOND_PASSWORD_FILE", kind: "file", help: "that password, read from this file" },
  REDIS_PER_SECOND_USERNAME: { env: "SLUICE_REDIS_PER_SECOND_USERNAME", kind: "text", help: "ACL user on the per-second store" },
  REDIS_PER_SECOND_TLS_CA: { env: "SLUICE_REDIS_PER_SECOND_TLS_CA", kind: "file", help: "PEM CA that signs the per-second store's certificate" },
  REDIS_PER_SECOND_TLS_CERT: { env: "SLUICE_REDIS_PER_SECOND_TLS_CERT", kind: "file", help: "PEM client certificate for the per-second store" },
  REDIS_PER_SECOND_TLS_KEY: { env: "SLUICE_REDIS_PER_SECOND_TLS_KEY", kind: "file", help: "PEM private key of that client certificate" },
  REDIS_PER_SECOND_SENTINEL_PASSWORD: {
    env: "SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD",
    kind: "secret",
    reference: "REDIS_PERSECOND_SENTINEL_AUTH",
    help: "password of the per-second store's sentinels",
  },
  REDIS_PER_SECOND_SENTINEL_PASSWORD_FILE: {
    env: "SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD_FILE",
    kind: "file",
    help: "that password, read from this file",
  },
  REDIS_PER_SECOND_SENTINEL_USERNAME: { env: "SLUICE_REDIS_PER_SECOND_SENTINEL_USERNAME", kind: "text", help: "ACL user on the per-second store's sentinels" },

  // --- Decisions: the deny note, local fallback, approximate limits, the memory store.
  DENY_NOTE_MAX: {
    env: "SLUICE_DENY_NOTE_MAX",
    kind: "int",
    default: 10_000,
    min: 0,
    max: 10_000_000,
    reference: "LOCAL_CACHE_SIZE_IN_BYTES",
    help: "deny notes kept per process; 0 = no notes",
  },
  DENY_NOTE_MAX_MS: {
    env: "SLUICE_DENY_NOTE_MAX_MS",
    kind: "int",
    default: 60_000,
    min: 1,
    max: 3_600_000,
    help: "longest a deny note refuses before the store is asked again",
  },
  LOCAL_MAX_KEYS: {
    env: "SLUICE_LOCAL_MAX_KEYS",
    kind: "int",
    default: 100_000,
    min: 1,
    max: 10_000_000,
    help: "counters of the in-memory fallback of failure_mode: local",
  },
  APPROXIMATE_MAX_KEYS: {
    env: "SLUICE_APPROXIMATE_MAX_KEYS",
    kind: "int",
    default: 100_000,
    min: 1,
    max: 10_000_000,
    help: "keys of approximate limits each instance holds",
  },
  MEMORY_MAX_KEYS: {
    env: "SLUICE_MEMORY_MAX_KEYS",
    kind: "int",
    default: 1_000_000,
    min: 1,
    max: 100_000_000,
    help: "counters the embedded memory store keeps",
  },

  // --- Rules.
  RELOAD_INTERVAL_S: {
    env: "SLUICE_RELOAD_INTERVAL_S",
    kind: "int",
    default: 30,
    min: 0,
    max: 86_400,
    reference: "RUNTIME_WATCH_ROOT",
    help: "full re-read of the rule directory besides watching it; 0 = watch only",
  },
  XDS_NODE_ID: {
    env: "SLUICE_XDS_NODE_ID",
    kind: "text",
    default: "default",
    reference: "CONFIG_GRPC_XDS_NODE_ID",
    help: "the node id sent to the control plane",
  },
  XDS_TLS: { env: "SLUICE_XDS_TLS", kind: "bool", reference: "CONFIG_GRPC_XDS_SERVER_USE_TLS", help: "TLS to the control plane" },
  XDS_TLS_CA: {
    env: "SLUICE_XDS_TLS_CA",
    kind: "file",
    reference: "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
    help: "PEM CA that signs the control plane's certificate",
  },
  XDS_TLS_CERT: {
    env: "SLUICE_XDS_TLS_CERT",
    kind: "file",
    reference: "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
    help: "PEM client certificate for the control plane",
  },
  XDS_TLS_KEY: { env: "SLUICE_XDS_TLS_KEY", kind: "file", reference: "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", help: "PEM private key of that client certificate" },
  XDS_TLS_SERVER_NAME: {
    env: "SLUICE_XDS_TLS_SERVER_NAME",
    kind: "text",
    defaultText: "the host",
    reference: "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
    help: "the name the control plane's certificate must carry",
  },

  // --- The gRPC server and the process.
  SHUTDOWN_GRACE_MS: {
    env: "SLUICE_SHUTDOWN_GRACE_MS",
    kind: "int",
    default: 5000,
    min: 0,
    max: 600_000,
    help: "time in-flight calls get to finish on SIGTERM",
  },
  DRAIN_DELAY_MS: {
    env: "SLUICE_DRAIN_DELAY_MS",
    kind: "int",
    default: 0,
    min: 0,
    max: 600_000,
    help: "on SIGTERM, time sluice keeps serving with health NOT_SERVING before it closes its port: above Envoy's health-check interval",
  },
  MAX_MESSAGE_BYTES: { env: "SLUICE_MAX_MESSAGE_BYTES", kind: "int", default: 1 << 20, min: 64, max: 64 << 20, help: "largest gRPC request accepted" },
  MAX_CONCURRENT_STREAMS: {
    env: "SLUICE_MAX_CONCURRENT_STREAMS",
    kind: "int",
    default: 1000,
    min: 1,
    max: 1_000_000,
    help: "calls in flight per client connection",
  },
  MAX_CONNECTION_AGE_MS: {
    env: "SLUICE_MAX_CONNECTION_AGE_MS",
    kind: "int",
    default: 0,
    min: 0,
    max: MAX_AGE_MS,
    defaultText: "`0` (no limit)",
    reference: "GRPC_MAX_CONNECTION_AGE",
    help: "a gRPC connection this old gets GOAWAY; 0 = no limit",
  },
  MAX_CONNECTION_AGE_GRACE_MS: {
    env: "SLUICE_MAX_CONNECTION_AGE_GRACE_MS",
    kind: "int",
    default: 3_600_000,
    min: 0,
    max: MAX_AGE_MS,
    reference: "GRPC_MAX_CONNECTION_AGE_GRACE",
    help: "time the calls on a connection past its age get before it is closed",
  },
  MAX_DESCRIPTORS: { env: "SLUICE_MAX_DESCRIPTORS", kind: "int", default: 64, min: 1, max: 10_000, help: "descriptors per request" },
  MAX_ENTRIES: { env: "SLUICE_MAX_ENTRIES", kind: "int", default: 32, min: 1, max: 10_000, help: "entries per descriptor" },
  MAX_KEY_LENGTH: { env: "SLUICE_MAX_KEY_LENGTH", kind: "int", default: 1024, min: 1, max: 1 << 20, help: "characters of a domain or an entry key" },
  MAX_VALUE_LENGTH: { env: "SLUICE_MAX_VALUE_LENGTH", kind: "int", default: 131_072, min: 1, max: 64 << 20, help: "characters of an entry value" },
  TLS_RELOAD_MS: { env: "SLUICE_TLS_RELOAD_MS", kind: "int", default: 5000, min: 10, max: 3_600_000, help: "how often the TLS files are checked for changes" },
  LOG_FORMAT: {
    env: "SLUICE_LOG_FORMAT",
    kind: "text",
    choices: ["json", "text"],
    defaultText: "`json`; `text` on a terminal",
    reference: "LOG_FORMAT",
    help: "json (pino's lines) or text (logrus's layout)",
  },
  TRANSPORT: { env: "SLUICE_TRANSPORT", kind: "text", help: "removed: a start with it set is refused" },
  WORKER_PORT: { env: "SLUICE_WORKER_PORT", kind: "text", defaultText: "—", help: "internal: the port a --workers primary hands its workers" },
  HEAP_GROWING_PERCENT: {
    env: "SLUICE_HEAP_GROWING_PERCENT",
    kind: "int",
    default: 100,
    min: 0,
    max: 300,
    help: "how far V8 lets its heap grow past what is live before a full collection, in percent; 0 leaves it to V8",
  },

  ADMIN_TOKEN_FILE: {
    env: "SLUICE_ADMIN_TOKEN_FILE",
    kind: "file",
    help: "a bearer token, read from this file at start: asked of admin clients beyond loopback (not on /healthz, /readyz)",
  },
  ADMIN_ALLOWED_HOSTS: {
    env: "SLUICE_ADMIN_ALLOWED_HOSTS",
    kind: "list",
    help: "Host names the admin port answers besides localhost and IP addresses (name or name:port, comma-separated)",
  },

  // --- What answers carry.
  RESPONSE_HEADERS: {
    env: "SLUICE_RESPONSE_HEADERS",
    kind: "bool",
    reference: "LIMIT_RESPONSE_HEADERS_ENABLED",
    help: "the reference's rate-limit headers on every answer that has a limit",
  },
  RESPONSE_HEADER_LIMIT: {
    env: "SLUICE_RESPONSE_HEADER_LIMIT",
    kind: "text",
    default: "RateLimit-Limit",
    reference: "LIMIT_LIMIT_HEADER",
    help: "name of the limit header",
  },
  RESPONSE_HEADER_REMAINING: {
    env: "SLUICE_RESPONSE_HEADER_REMAINING",
    kind: "text",
    default: "RateLimit-Remaining",
    reference: "LIMIT_REMAINING_HEADER",
    help: "name of the remaining header",
  },
  RESPONSE_HEADER_RESET: {
    env: "SLUICE_RESPONSE_HEADER_RESET",
    kind: "text",
    default: "RateLimit-Reset",
    reference: "LIMIT_RESET_HEADER",
    help: "name of the reset header",
  },
  RESPONSE_DYNAMIC_METADATA: {
    env: "SLUICE_RESPONSE_DYNAMIC_METADATA",
    kind: "text",
    default: "rules",
    choices: ["rules", "reference", "off"],
    reference: "RESPONSE_DYNAMIC_METADATA",
    help: "what dynamic_metadata carries",
  },

  // --- Telemetry and who is being limited.
  NEAR_LIMIT_RATIO: {
    env: "SLUICE_NEAR_LIMIT_RATIO",
    kind: "number",
    default: 0.8,
    reference: "NEAR_LIMIT_RATIO",
    help: "near_limit counts allowed hits past floor(limit x ratio) (above 0, at most 1)",
  },
  DETAILED_METRIC_MAX_VALUES: {
    env: "SLUICE_DETAILED_METRIC_MAX_VALUES",
    kind: "int",
    default: 100,
    min: 1,
    max: 10_000,
    help: "distinct values a detailed_metric rule shows in metric labels",
  },
  STATSD: { env: "SLUICE_STATSD", kind: "address", reference: "USE_STATSD", help: "host:port of a statsd: counters under the reference's names" },
  STATSD_PROTOCOL: { env: "SLUICE_STATSD_PROTOCOL", kind: "text", default: "udp", choices: ["udp", "tcp"], help: "udp or tcp" },
  STATSD_FLUSH_MS: {
    env: "SLUICE_STATSD_FLUSH_MS",
    kind: "int",
    default: 10_000,
    min: 10,
    max: 3_600_000,
    reference: "STATS_FLUSH_INTERVAL",
    help: "how often counters are sent",
  },
  STATSD_TAGS: { env: "SLUICE_STATSD_TAGS", kind: "list", reference: "EXTRA_TAGS", help: "tag:value,... appended to every statsd name" },
  TRACING_SAMPLING_RATE: {
    env: "SLUICE_TRACING_SAMPLING_RATE",
    kind: "number",
    default: 1,
    reference: "TRACING_SAMPLING_RATE",
    help: "share (0 to 1) of calls without a sampled parent that are traced",
  },
  TOP: { env: "SLUICE_TOP", kind: "bool", default: true, help: "off: no refusal summaries (/top, /ui)" },
  TOP_SECRET_KEYS: {
    env: "SLUICE_TOP_SECRET_KEYS",
    commands: ["serve", "explain"],
    kind: "list",
    default: ["api_key", "apikey", "authorization", "token", "password", "secret"],
    help: "descriptor keys whose values store keys, logs, metrics, explain and /top hold only as a keyed hash; empty = none",
  },
  TOP_HASH_KEY: {
    env: "SLUICE_TOP_HASH_KEY",
    commands: ["serve", "explain"],
    kind: "secret",
    default: "sluice-top",
    defaultText: "a fixed key",
    help: "the key of that hash (the same on every instance: it names the counters)",
  },
} as const satisfies Record<string, Setting>;

type Table = typeof SETTINGS;

/** Every SLUICE_* name by its entry's key (ENV.PORT is "SLUICE_PORT"). */
export const ENV = Object.fromEntries(Object.entries(SETTINGS).map(([k, s]) => [k, s.env])) as { readonly [K in keyof Table]: Table[K]["env"] };

/** As the docs' default column shows a setting's default. */
export function defaultText(s: Setting): string {
  if (s.defaultText !== undefined) return s.defaultText;
  if (s.kind === "bool") return s.default ? "on" : "off";
  const d = s.default;
  if (d === undefined) return "none";
  return `\`${Array.isArray(d) ? d.join(",") : String(d)}\``;
}

/** The commands whose flag (or reading) a setting has. */
export function commandsOf(s: Setting): readonly Command[] {
  return s.commands ?? ["serve"];
}

/** The name a value was read from: the flag when it was given, else the variable. */
function source(s: Setting, flagValue: unknown): string {
  return flagValue !== undefined && s.flag ? `--${s.flag}` : s.env;
}

/** A whole number from a flag's value or else the variable, in its range; unset: the default. Errors name where the value came from. */
export function readInt(env: NodeJS.ProcessEnv, s: IntSetting, flagValue?: string): number {
  const raw = flagValue ?? env[s.env];
  if (raw === undefined || raw === "") return s.default;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < s.min || n > s.max) {
    const name = source(s, flagValue);
    throw new UsageError(`${name} must be an integer from ${s.min} to ${s.max}, got '${raw}'`, name);
  }
  return n;
}

/**
 * A text from a flag's value or else the variable, when set and not empty, else `fallback` (its default); one of its
 * choices where it has them. Errors name where the value came from and the values allowed.
 */
export function readText(env: NodeJS.ProcessEnv, s: TextSetting, flagValue?: string, fallback = s.default): string {
  const raw = flagValue ?? env[s.env];
  const v = raw === undefined || raw === "" ? fallback : raw;
  // A caller's mistake (a setting without a default read without a fallback), not an operator's.
  if (v === undefined) throw new Error(`${s.env} has no default: readText needs a fallback`);
  if (s.choices && !s.choices.includes(v)) {
    const name = source(s, flagValue);
    const allowed = s.choices.length === 2 ? s.choices.join(" or ") : `one of ${s.choices.join(", ")}`;
    throw new UsageError(`${name} must be ${allowed}, got '${v}'`, name);
  }
  return v;
}

/**
 * The spellings of yes and of no, for every yes/no setting: the reference's (exactly what Go's strconv.ParseBool
 * takes) and sluice's own (yes/no, on/off, in the same three cases). Anything else is neither.
 */
export const YES = ["1", "t", "T", "TRUE", "true", "True", "yes", "Yes", "YES", "on", "On", "ON"] as const;
export const NO = ["0", "f", "F", "FALSE", "false", "False", "no", "No", "NO", "off", "Off", "OFF"] as const;
/** What an error says a yes/no value must be. */
export const YES_NO_TEXT = "true or false (or 1/0, t/f, yes/no, on/off)";

/** The one yes/no reader: true for a spelling of yes, false for one of no, undefined for anything else. */
export function yesNo(raw: string): boolean | undefined {
  if ((YES as readonly string[]).includes(raw)) return true;
  if ((NO as readonly string[]).includes(raw)) return false;
  return undefined;
}

/**
 * A yes/no setting: its flag (given = on) or else its variable; unset or empty: its default (off unless the table
 * says on). A value that is neither yes nor no is a usage error naming the variable: a typo never means "no".
 */
export function readBool(env: NodeJS.ProcessEnv, s: BoolSetting, flagValue?: boolean): boolean {
  if (flagValue !== undefined) return flagValue;
  const raw = env[s.env];
  if (raw === undefined || raw === "") return s.default ?? false;
  const v = yesNo(raw);
  if (v === undefined) throw new UsageError(`${s.env} must be ${YES_NO_TEXT}, got '${raw}'`, s.env);
  return v;
}
