// Flags + environment -> one validated Settings. Each setting's name, default and range is its entry of
// core/settings-table.ts (the flags are built from it: flags.ts). Flags win over environment variables.
import { ENV, readBool, readInt, readText, SETTINGS } from "../core/settings-table.js";
import type { RequestBounds } from "../server/grpc/decode.js";
import type { TlsFiles } from "../server/grpc/tls.js";
import type { RedisAuth } from "../store/redis-options.js";
import type { SentinelSpec } from "../store/redis-sentinel.js";
import type { RedisStoreSpec } from "../store/make-redis-store.js";
import { parseFlags, SERVE_FLAGS } from "./flags.js";
import { MAIN_STORE, perSecondSettings, redisStoreSettings } from "./redis-store.js";
import { keyPrefixProblem } from "../core/keys.js";
import { UsageError } from "../core/usage-error.js";
import type { ResponseMetadataMode } from "../limiter/limiter.js";
import { headerNameProblem, type RateLimitHeaderNames } from "../limiter/rate-limit-headers.js";
import type { FailureMode } from "../rules/model.js";
import { readReferenceEnv, type OwnSetting, type ReferenceSettings } from "./reference/env.js";
import { checkListeners } from "./reference/listeners.js";
import { readAdminAccess, type AdminAccess } from "../server/admin/admin-access.js";
import { goFloat } from "../core/go-values.js";
import { Secret } from "../core/secret.js";
import { statsdSettings } from "../telemetry/statsd-settings.js";
import type { StatsdSettings } from "../telemetry/statsd.js";
import { xdsSettings, type XdsSettings } from "../xds/xds-settings.js";
import { tracingSettings, type TracingSettings } from "../telemetry/tracing-settings.js";

/** ReferenceSettings: what only envoyproxy/ratelimit's variables set (settings/reference/). */
export interface Settings extends ReferenceSettings, RuleDirSettings {
  /** Rules from this control plane (xDS) instead of configDir; absent = the rule directory. */
  configXds?: XdsSettings;
  /** redis://host:port[/db], one per shard; empty = the embedded memory store (single-instance mode). */
  redisUrls: string[];
  port: number;
  host: string;
  /** Per store call; a slower answer counts as a failure. */
  storeTimeoutMs: number;
  logLevel: string;
  bounds: RequestBounds;
  maxMessageBytes: number;
  /** Concurrent calls per client connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** Open gRPC client connections per process; a new one past it is closed at once. */
  maxConnections: number;
  /** GOAWAY to connections this old, closed graceMs later (Envoy reconnects, possibly to another instance); absent = no limit. */
  maxConnectionAge?: { ageMs: number; graceMs: number };
  shutdownGraceMs: number;
  /** After SIGTERM, how long calls are still served while gRPC health says NOT_SERVING, before the drain starts. */
  drainDelayMs: number;
  /** Admin HTTP (health, metrics, rules, /top, /ui, /explain; nothing that changes state). */
  adminPort: number;
  adminHost: string;
  /** Who the admin port answers: its token and the Host names it allows (server/admin/admin-access.ts). */
  adminAccess: AdminAccess;
  /**
   * Fixed windows count in the reference's keys with its increments (SLUICE_REFERENCE_KEYS; on by default
   * under the reference's environment), so reference and sluice instances on one Redis share counters.
   */
  referenceKeys?: { countsRefused: boolean };
  /** Full re-read of the rule directory as a fallback to watching it; 0 = off. */
  reloadIntervalMs: number;
  /** Redis Cluster startup nodes (host:port); empty = not a cluster. */
  redisCluster: { host: string; port: number }[];
  /** The Sentinel-monitored master to count on (it moves on failover); absent = no Sentinel. */
  redisSentinel?: SentinelSpec;
  /** Credentials of the sentinels themselves (redisAuth is the master's). */
  redisSentinelAuth: RedisAuth;
  /** Store calls failing in a row that open a node's circuit; time between probes while open. */
  circuitFailures: number;
  circuitProbeMs: number;
  /** Deny notes kept per instance (0 = no notes). */
  denyNoteMax: number;
  denyNoteMaxMs: number;
  /** Keys of the in-memory fallback for failure_mode: local. */
  localMaxKeys: number;
  /** Keys of approximate limits each instance's local view holds (SLUICE_APPROXIMATE_MAX_KEYS). */
  approximateMaxKeys: number;
  /** Memory store only: most counters kept (least recently used go first). */
  memoryMaxKeys: number;
  /** V8's heap growth past the live heap before a full collection, percent (0 = V8's own; cli/heap-growth.ts). */
  heapGrowingPercent: number;
  /** gRPC server TLS; with a CA, client certificates are required (mTLS). Absent = plaintext. */
  tls?: TlsFiles;
  /** Redis credentials and TLS trust; the password is a Secret, never printed. */
  redisAuth: RedisAuth;
  /** Where limits whose unit is a second count (the reference's REDIS_PERSECOND); absent = the main store. */
  redisPerSecond?: RedisStoreSpec;
  /** Processes serving the port (node:cluster); 1 = this process serves, no cluster. */
  workers: number;
  /** detailed_metric: distinct descriptor values per rule and limit in metric labels, then "_other_". */
  detailedMetricMaxValues: number;
  /** Starts every store key (core/keys.ts), so deployments can share one Redis; "" by default. */
  keyPrefix: string;
  /** SLUICE_TOP=off: no refusal summaries (no /top figures, no store writes for them); on by default. */
  topSummaries: boolean;
  /** Descriptor keys whose values /top and `sluice top` show hashed (SLUICE_TOP_SECRET_KEYS; insight/client.ts). */
  topSecretKeys: string[];
  /** The key of that hash (SLUICE_TOP_HASH_KEY); the same on every instance, so one value shows the same everywhere. */
  topHashKey: Secret;
  /** json: pino's lines; text: one human line per entry (telemetry/text-log.ts). */
  logFormat: "json" | "text";
  /** SLUICE_STATSD (or the reference's USE_STATSD...): counters sent to statsd; absent = off. */
  statsd?: StatsdSettings;
  /** The reference's RateLimit-* headers on answers (SLUICE_RESPONSE_HEADERS, off by default) and their names. */
  responseHeaders: { enabled: boolean } & RateLimitHeaderNames;
  /** dynamic_metadata: rules (default), reference, off (SLUICE_RESPONSE_DYNAMIC_METADATA). */
  responseMetadata: ResponseMetadataMode;
  /** near_limit counts allowed hits past floor(limit x this), as the reference (SLUICE_NEAR_LIMIT_RATIO). */
  nearLimitRatio: number;
  /** --tracing otlp (SLUICE_TRACING, or the reference's TRACING_ENABLED): spans over OTLP; absent = off. */
  tracing?: TracingSettings;
}

export { UsageError };
export { CHECK_FLAGS, COMMAND_FLAGS, EXPLAIN_FLAGS, parseFlags, SERVE_FLAGS, TOP_FLAGS, type FlagSpec } from "./flags.js";

/** A comma-separated list (blanks dropped); unset: the fallback, empty: none. */
function listEnv(env: NodeJS.ProcessEnv, name: string, fallback: string[]): string[] {
  const raw = env[name];
  if (raw === undefined) return fallback;
  return raw
    .split(",")
    .map((k) => k.trim())
    .filter((k) => k !== "");
}

/** Where the rules come from and how they load, the same for serve, check and explain. */
interface RuleDirSettings {
  configDir: string;
  mergeDomains: boolean;
  /** failure_mode where the rules name none (--failure-mode; `error` under the reference's environment). */
  failureMode: FailureMode;
  /** An empty or missing rule directory at start means no limits instead of a refusal (rules/empty-dir.ts). */
  allowEmptyRules: boolean;
}

/**
 * The rule directory's settings of check and explain, read as serve reads them (flag > SLUICE_* > the
 * reference's RUNTIME_* and MERGE_DOMAIN_CONFIG > default), and the environment with the reference's
 * variables mapped (explain's key prefix).
 */
export function ruleDirSettings(values: RuleDirFlags, rawEnv: NodeJS.ProcessEnv): RuleDirSettings & { env: NodeJS.ProcessEnv } {
  const { env } = referenceEnv(values, rawEnv);
  return { ...ruleDirFrom(values, env), env };
}

type RuleDirFlags = {
  config?: string;
  "failure-mode"?: string;
  "merge-domains"?: boolean;
  "allow-empty-rules"?: boolean;
};

function ruleDirFrom(values: RuleDirFlags, env: NodeJS.ProcessEnv): RuleDirSettings {
  return {
    configDir: values.config || env[ENV.CONFIG] || SETTINGS.CONFIG.default,
    mergeDomains: readBool(env, SETTINGS.MERGE_DOMAINS, values["merge-domains"]),
    failureMode: readText(env, SETTINGS.FAILURE_MODE, values["failure-mode"]) as FailureMode,
    allowEmptyRules: readBool(env, SETTINGS.ALLOW_EMPTY_RULES, values["allow-empty-rules"]),
  };
}

/** { [name]: value } when the value is there, else {}. */
function optional<K extends string, V>(name: K, value: V | undefined): { [P in K]?: V } {
  return value === undefined ? {} : ({ [name]: value } as { [P in K]?: V });
}

/** `terminal`: stdout is a terminal, where the log's default format is text. */
export function serveSettings(argv: string[], rawEnv: NodeJS.ProcessEnv, terminal = false): Settings {
  const { values } = parseFlags(SERVE_FLAGS, argv);
  // envoyproxy/ratelimit's variables fill in the SLUICE_* values they stand for (flag > SLUICE_* > reference).
  const reference = referenceEnv(values, rawEnv);
  const env = reference.env;
  const main = redisStoreSettings(values, env, MAIN_STORE);
  const { urls: redisUrls, cluster: redisCluster, sentinel: redisSentinel, sentinelAuth: redisSentinelAuth } = main;
  const redisPerSecond = perSecondSettings(values, env, main);
  const security = securitySettings(values, env);
  refuseRemovedTransport(env[ENV.TRANSPORT]);
  const settings: Settings = {
    ...reference.settings,
    ...ruleDirFrom(values, env),
    ...ruleSourceSettings(values, env, reference.settings.xdsTuning),
    redisUrls,
    redisAuth: main.auth,
    ...(redisPerSecond ? { redisPerSecond } : {}),
    port: readInt(env, SETTINGS.PORT, values.port),
    host: values.host ?? env[ENV.HOST] ?? SETTINGS.HOST.default,
    storeTimeoutMs: readInt(env, SETTINGS.STORE_TIMEOUT_MS),
    logLevel: readText(env, SETTINGS.LOG_LEVEL, values["log-level"]),
    ...security,
    shutdownGraceMs: readInt(env, SETTINGS.SHUTDOWN_GRACE_MS),
    drainDelayMs: readInt(env, SETTINGS.DRAIN_DELAY_MS),
    adminPort: readInt(env, SETTINGS.ADMIN_PORT, values["admin-port"]),
    // Loopback by default: the admin port is for the local machine unless an operator opens it.
    adminHost: values["admin-host"] ?? env[ENV.ADMIN_HOST] ?? SETTINGS.ADMIN_HOST.default,
    adminAccess: readAdminAccess(env),
    ...optional("referenceKeys", referenceKeys(rawEnv, env, main, redisPerSecond, reference.settings)),
    redisCluster,
    redisSentinel,
    redisSentinelAuth,
    circuitFailures: readInt(env, SETTINGS.CIRCUIT_FAILURES),
    circuitProbeMs: readInt(env, SETTINGS.CIRCUIT_PROBE_MS),
    denyNoteMax: readInt(env, SETTINGS.DENY_NOTE_MAX),
    denyNoteMaxMs: readInt(env, SETTINGS.DENY_NOTE_MAX_MS),
    localMaxKeys: readInt(env, SETTINGS.LOCAL_MAX_KEYS),
    approximateMaxKeys: readInt(env, SETTINGS.APPROXIMATE_MAX_KEYS),
    reloadIntervalMs: 1000 * readInt(env, SETTINGS.RELOAD_INTERVAL_S),
    workers: readInt(env, SETTINGS.WORKERS, values.workers),
    heapGrowingPercent: readInt(env, SETTINGS.HEAP_GROWING_PERCENT),
    detailedMetricMaxValues: readInt(env, SETTINGS.DETAILED_METRIC_MAX_VALUES),
    keyPrefix: keyPrefix(values["key-prefix"] ?? env[ENV.KEY_PREFIX]),
    topSummaries: readBool(env, SETTINGS.TOP),
    topSecretKeys: listEnv(env, ENV.TOP_SECRET_KEYS, [...SETTINGS.TOP_SECRET_KEYS.default]),
    topHashKey: new Secret(env[ENV.TOP_HASH_KEY] || SETTINGS.TOP_HASH_KEY.default),
    logFormat: logFormat(env, terminal),
    ...statsdOrUsage(env),
    ...tracingOrUsage(values.tracing, env),
    ...answerSettings(env),
  };
  checkListeners(settings);
  return settings;
}

/** --config-xds: rules from a control plane; then no rule directory is read (giving one too is a mistake). */
function ruleSourceSettings(values: { config?: string; "config-xds"?: string }, env: NodeJS.ProcessEnv, tuning: ReferenceSettings["xdsTuning"]) {
  const configXds: XdsSettings | undefined = xdsSettings(values["config-xds"], env, tuning);
  if (configXds && (values.config !== undefined || env[ENV.CONFIG])) {
    throw new UsageError(
      "--config (or SLUICE_CONFIG, RUNTIME_ROOT) and --config-xds (or CONFIG_TYPE=GRPC_XDS_SOTW) cannot be used together: rules come from one source",
    );
  }
  return configXds ? { configXds } : {};
}

function statsdOrUsage(env: NodeJS.ProcessEnv): { statsd?: StatsdSettings } {
  const r = statsdSettings(env);
  return r ? { statsd: r } : {};
}

function tracingOrUsage(flag: string | undefined, env: NodeJS.ProcessEnv): { tracing?: TracingSettings } {
  const r = tracingSettings(flag, env);
  return r ? { tracing: r } : {};
}

/** --key-prefix / SLUICE_KEY_PREFIX (also `explain`'s). */
export function keyPrefix(raw: string | undefined): string {
  const prefix = raw ?? "";
  const problem = keyPrefixProblem(prefix);
  if (problem) throw new UsageError(`--key-prefix ${problem}, got '${prefix}'`, "--key-prefix");
  return prefix;
}

// Removed with the grpc-js transport: refused, not ignored, so a start that pinned grpc-js is not served by h2 unawares.
function refuseRemovedTransport(raw: string | undefined): void {
  if (raw === undefined || raw === "") return;
  throw new UsageError(
    `SLUICE_TRANSPORT was removed (got '${raw}'): sluice has one gRPC server, its own on node:http2 (the former default, h2); unset SLUICE_TRANSPORT`,
  );
}

/** Unset: text on a terminal, JSON elsewhere. */
function logFormat(env: NodeJS.ProcessEnv, terminal: boolean): "json" | "text" {
  return readText(env, SETTINGS.LOG_FORMAT, undefined, terminal ? "text" : "json") as "json" | "text";
}

// --- What answers carry besides the decision (docs/rules.md "Answers"), and the near_limit ratio.
function answerSettings(env: NodeJS.ProcessEnv): Pick<Settings, "responseHeaders" | "responseMetadata" | "nearLimitRatio"> {
  const entries = {
    limit: SETTINGS.RESPONSE_HEADER_LIMIT,
    remaining: SETTINGS.RESPONSE_HEADER_REMAINING,
    reset: SETTINGS.RESPONSE_HEADER_RESET,
  } as const;
  const responseHeaders: Settings["responseHeaders"] = {
    enabled: readBool(env, SETTINGS.RESPONSE_HEADERS),
    limit: entries.limit.default,
    remaining: entries.remaining.default,
    reset: entries.reset.default,
  };
  for (const k of ["limit", "remaining", "reset"] as const) {
    const v = readText(env, entries[k]);
    const problem = headerNameProblem(v);
    if (problem) throw new UsageError(`${entries[k].env} ${problem}, got '${v}'`);
    responseHeaders[k] = v;
  }
  const lower = [responseHeaders.limit, responseHeaders.remaining, responseHeaders.reset].map((n) => n.toLowerCase());
  if (responseHeaders.enabled && new Set(lower).size < 3) {
    throw new UsageError(
      `SLUICE_RESPONSE_HEADER_LIMIT, _REMAINING and _RESET must be three different names, got '${responseHeaders.limit}', '${responseHeaders.remaining}', '${responseHeaders.reset}'`,
    );
  }
  const mode = readText(env, SETTINGS.RESPONSE_DYNAMIC_METADATA);
  const rawRatio = env[ENV.NEAR_LIMIT_RATIO];
  const ratio = rawRatio === undefined || rawRatio === "" ? SETTINGS.NEAR_LIMIT_RATIO.default : goFloat(rawRatio);
  if (ratio === undefined || !(ratio > 0 && ratio <= 1))
    throw new UsageError(`SLUICE_NEAR_LIMIT_RATIO must be a number above 0 and at most 1, got '${rawRatio}'`);
  return { responseHeaders, responseMetadata: mode as ResponseMetadataMode, nearLimitRatio: ratio };
}

// --- envoyproxy/ratelimit's environment (src/compat; docs/configuration.md "Reference environment variables").
/**
 * The admin address `serve` takes in this environment with no flags (the reference's environment moves it to
 * 8082): where `sluice top` looks unless given --admin. A wildcard host is reached on loopback.
 */
export function defaultAdminAddress(rawEnv: NodeJS.ProcessEnv): string {
  const env = referenceEnv({}, rawEnv).env;
  const host = env[ENV.ADMIN_HOST] || SETTINGS.ADMIN_HOST.default;
  const port = readInt(env, SETTINGS.ADMIN_PORT);
  return `${reachableHost(host)}:${port}`;
}

/** A listening host as a client dials it: a wildcard on loopback, an IPv6 address in brackets. */
function reachableHost(host: string): string {
  if (host === "0.0.0.0") return "127.0.0.1";
  if (host === "::" || host === "[::]") return "[::1]";
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

function referenceEnv(values: Record<string, unknown>, env: NodeJS.ProcessEnv) {
  const own: OwnSetting = (flag, name) =>
    (flag !== undefined && values[flag] !== undefined) || (name !== undefined && env[name] !== undefined && env[name] !== "");
  return readReferenceEnv(env, own);
}

/**
 * SLUICE_REFERENCE_KEYS: a request's fixed-window keys of one descriptor go to the node the reference would
 * use, so the keys must all live on one node: one Redis (or Sentinel master) per store. Asked for on a
 * cluster or shards it is refused; on by default there (the reference's environment), it stays off, noted.
 */
function referenceKeys(
  rawEnv: NodeJS.ProcessEnv,
  env: NodeJS.ProcessEnv,
  main: RedisStoreSpec,
  perSecond: RedisStoreSpec | undefined,
  ref: ReferenceSettings,
): Settings["referenceKeys"] {
  if (!readBool(env, SETTINGS.REFERENCE_KEYS)) return undefined;
  const spread = [main, ...(perSecond ? [perSecond] : [])].some((s) => s.cluster.length > 0 || s.urls.length > 1);
  if (!spread) return { countsRefused: !ref.referenceStopIncrement };
  if (rawEnv[ENV.REFERENCE_KEYS]) {
    throw new UsageError("SLUICE_REFERENCE_KEYS needs one Redis node per store (--redis with one URL, or --redis-sentinel): not a cluster or shards");
  }
  ref.referenceNotes.push({
    variable: rawEnv.REDIS_TYPE ? "REDIS_TYPE" : ENV.REFERENCE_KEYS,
    reason:
      "the reference's keys (one count with reference instances during a swap) need one Redis node: on a cluster sluice counts in its own keys, so counters start from zero at the swap",
    differs: true,
  });
  return undefined;
}

// --- Security: request bounds, memory-store cap, gRPC TLS (see docs/operating.md "Security"; Redis credentials: redisAuthSettings).
function securitySettings(values: Record<string, string | boolean | undefined>, env: NodeJS.ProcessEnv) {
  const flag = (name: string) => (typeof values[name] === "string" ? (values[name] as string) : undefined);
  const bounds: RequestBounds = {
    maxDescriptors: readInt(env, SETTINGS.MAX_DESCRIPTORS),
    maxEntries: readInt(env, SETTINGS.MAX_ENTRIES),
    maxKeyLength: readInt(env, SETTINGS.MAX_KEY_LENGTH),
    maxValueLength: readInt(env, SETTINGS.MAX_VALUE_LENGTH),
  };
  const maxMessageBytes = readInt(env, SETTINGS.MAX_MESSAGE_BYTES);
  const maxConcurrentStreams = readInt(env, SETTINGS.MAX_CONCURRENT_STREAMS);
  const maxConnections = readInt(env, SETTINGS.MAX_CONNECTIONS, flag("max-connections"));
  const ageMs = readInt(env, SETTINGS.MAX_CONNECTION_AGE_MS);
  const graceMs = readInt(env, SETTINGS.MAX_CONNECTION_AGE_GRACE_MS);
  const maxConnectionAge = ageMs > 0 ? { ageMs, graceMs } : undefined;
  const memoryMaxKeys = readInt(env, SETTINGS.MEMORY_MAX_KEYS);

  const certFile = flag("tls-cert") ?? env[ENV.TLS_CERT];
  const keyFile = flag("tls-key") ?? env[ENV.TLS_KEY];
  const caFile = flag("tls-ca") ?? env[ENV.TLS_CA];
  if (!certFile !== !keyFile) throw new UsageError("--tls-cert and --tls-key go together");
  if (caFile && !certFile) throw new UsageError("--tls-ca (client certificates) needs --tls-cert and --tls-key");
  const tls: TlsFiles | undefined = certFile
    ? {
        certFile,
        keyFile: keyFile!,
        caFile: caFile || undefined,
        reloadMs: readInt(env, SETTINGS.TLS_RELOAD_MS),
      }
    : undefined;
  return { bounds, maxMessageBytes, maxConcurrentStreams, maxConnections, maxConnectionAge, memoryMaxKeys, tls };
}
