// The reference's logs, stats, tracing and local cache: LOG_*, USE_STATSD / USE_PROMETHEUS / ...,
// TRACING_*, NEAR_LIMIT_RATIO, LOCAL_CACHE_SIZE_IN_BYTES.
import { ENV } from "../../core/settings-table.js";
import { goListenAddress, goMap } from "../../core/go-values.js";
import type { ReferenceReader } from "./reader.js";
import type { HttpListener } from "./server.js";

interface TelemetryPart {
  /** USE_PROMETHEUS: sluice's metrics on their own listener, at `path`. */
  prometheus?: HttpListener & { path: string };
  /** EXTRA_TAGS: constant labels on every metric sluice serves. */
  metricLabels: Record<string, string>;
}

/** logrus level names (ParseLevel lower-cases) -> pino's. */
const LOG_LEVELS: Record<string, string> = {
  panic: "fatal",
  fatal: "fatal",
  error: "error",
  warn: "warn",
  warning: "warn",
  info: "info",
  debug: "debug",
  trace: "trace",
};

/** Labels sluice's metrics carry already, or Prometheus reserves: an extra label may not take these names. */
const TAKEN_LABELS = new Set([
  "domain",
  "rule",
  "limit",
  "descriptor",
  "code",
  "node",
  "mode",
  "result",
  "kind",
  "le",
  "quantile",
  "space",
  "version",
  "major",
  "minor",
  "patch",
  "type",
]);

/** gostats' own variable (its NewTCPStatsdSink reads it): tcp unless set. */
const STATSD_PROTOCOL = "STATSD_PROTOCOL";

/** The deny note's cost per entry (key, record, map slot), to turn the reference's cache bytes into entries. */
const DENY_NOTE_BYTES_PER_ENTRY = 256;
const DENY_NOTE_MAX_ENTRIES = 10_000_000;

export function readTelemetry(r: ReferenceReader): TelemetryPart {
  readLogs(r);
  readLocalCache(r);
  const near = r.float("NEAR_LIMIT_RATIO", 0.8);
  if (!(near > 0 && near <= 1)) throw r.error("NEAR_LIMIT_RATIO", "must be above 0 and at most 1 (a share of each limit)");
  if (r.has("NEAR_LIMIT_RATIO") && !r.own(undefined, ENV.NEAR_LIMIT_RATIO)) r.map(ENV.NEAR_LIMIT_RATIO, String(near));
  readTracing(r);
  return readStats(r);
}

/** The reference's OTLP exporter protocols -> OpenTelemetry's names ("http" is protobuf over HTTP). */
const TRACING_PROTOCOLS: Record<string, string> = { http: "http/protobuf", grpc: "grpc" };

/**
 * TRACING_ENABLED=true turns sluice's tracing on; TRACING_SERVICE_NAME (default RateLimit), _NAMESPACE and
 * _INSTANCE_ID become the resource, TRACING_EXPORTER_PROTOCOL the OTLP protocol, TRACING_SAMPLING_RATE the
 * root sampling rate. The exporter's OTEL_EXPORTER_OTLP_* variables are the same in both.
 */
function readTracing(r: ReferenceReader): void {
  const names = ["TRACING_SERVICE_NAME", "TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID", "TRACING_EXPORTER_PROTOCOL", "TRACING_SAMPLING_RATE"];
  if (!r.bool("TRACING_ENABLED", false)) {
    for (const v of names) r.ignore(v, "used only with TRACING_ENABLED=true");
    return;
  }
  const protocol = TRACING_PROTOCOLS[r.str("TRACING_EXPORTER_PROTOCOL", "http")];
  if (!protocol) throw r.error("TRACING_EXPORTER_PROTOCOL", "must be http or grpc");
  const rate = r.float("TRACING_SAMPLING_RATE", 1);
  if (!(rate >= 0 && rate <= 1)) throw r.error("TRACING_SAMPLING_RATE", "must be from 0 to 1");
  if (!r.own("tracing", ENV.TRACING)) r.map(ENV.TRACING, "otlp");
  if (!r.own(undefined, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") && !r.own(undefined, "OTEL_EXPORTER_OTLP_PROTOCOL"))
    r.map("OTEL_EXPORTER_OTLP_PROTOCOL", protocol);
  if (r.has("TRACING_SAMPLING_RATE") && !r.own(undefined, ENV.TRACING_SAMPLING_RATE)) r.map(ENV.TRACING_SAMPLING_RATE, String(rate));
  if (!r.own(undefined, "OTEL_SERVICE_NAME")) r.map("OTEL_SERVICE_NAME", r.str("TRACING_SERVICE_NAME", "RateLimit"));
  // Resource attributes from the reference only where OTEL_RESOURCE_ATTRIBUTES does not name them itself.
  const pairs: string[] = [];
  for (const [v, key] of [
    ["TRACING_SERVICE_NAMESPACE", "service.namespace"],
    ["TRACING_SERVICE_INSTANCE_ID", "service.instance.id"],
  ]) {
    if (!r.has(v)) continue;
    if (r.own(undefined, "OTEL_RESOURCE_ATTRIBUTES")) r.ignore(v, "OTEL_RESOURCE_ATTRIBUTES is set and gives the resource");
    else pairs.push(`${key}=${encodeURIComponent(r.str(v, ""))}`);
  }
  if (pairs.length > 0) r.map("OTEL_RESOURCE_ATTRIBUTES", pairs.join(","));
}

function readLogs(r: ReferenceReader): void {
  if (r.has("LOG_LEVEL")) {
    const level = LOG_LEVELS[r.str("LOG_LEVEL", "").toLowerCase()];
    if (!level) throw r.error("LOG_LEVEL", "must be one of panic, fatal, error, warn, info, debug, trace");
    if (!r.own("log-level", ENV.LOG_LEVEL)) r.map(ENV.LOG_LEVEL, level);
  }
  if (r.has("LOG_FORMAT")) {
    const format = r.str("LOG_FORMAT", "").toLowerCase();
    if (format !== "json" && format !== "text") throw r.error("LOG_FORMAT", "must be json or text");
    if (!r.own(undefined, ENV.LOG_FORMAT)) r.map(ENV.LOG_FORMAT, format);
  }
}

/** 0 turns the deny note off; else as many notes as the bytes would hold (docs/configuration.md). */
function readLocalCache(r: ReferenceReader): void {
  const bytes = r.int("LOCAL_CACHE_SIZE_IN_BYTES", 0, 0, Number.MAX_SAFE_INTEGER);
  if (!r.has("LOCAL_CACHE_SIZE_IN_BYTES") || r.own(undefined, ENV.DENY_NOTE_MAX)) return;
  const entries = bytes === 0 ? 0 : Math.min(DENY_NOTE_MAX_ENTRIES, Math.max(1, Math.floor(bytes / DENY_NOTE_BYTES_PER_ENTRY)));
  r.map(ENV.DENY_NOTE_MAX, String(entries));
}

function readStats(r: ReferenceReader): TelemetryPart {
  const disabled = r.bool("DISABLE_STATS", false);
  const statsd = r.bool("USE_STATSD", true);
  const dogstatsd = r.bool("USE_DOG_STATSD", false);
  const prometheus = r.bool("USE_PROMETHEUS", false);
  const flushMs = r.durationMs("STATS_FLUSH_INTERVAL", 10_000);
  const port = r.int("STATSD_PORT", 8125, 0, 65535);
  r.ignore("USE_DOG_STATSD_MOGRIFIERS", "used only with USE_DOG_STATSD=true");

  const rawTags = r.str("EXTRA_TAGS", "");
  const labels = goMap(rawTags);
  if (!labels) throw r.error("EXTRA_TAGS", "takes tag:value[,tag:value...]");
  for (const name of Object.keys(labels)) {
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(name) || name.startsWith("__") || TAKEN_LABELS.has(name)) {
      throw r.error("EXTRA_TAGS", `'${name}' cannot be a metric label (letters, digits and _, not ${[...TAKEN_LABELS].join(", ")})`);
    }
  }
  if (disabled) {
    for (const v of [
      "USE_STATSD",
      "USE_DOG_STATSD",
      "USE_PROMETHEUS",
      "STATSD_HOST",
      "STATSD_PORT",
      STATSD_PROTOCOL,
      "STATS_FLUSH_INTERVAL",
      "PROMETHEUS_ADDR",
      "PROMETHEUS_PATH",
      "PROMETHEUS_MAPPER_YAML",
      "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
    ]) {
      r.ignore(v, "DISABLE_STATS=true: no stats sink (sluice's admin port still serves /metrics)");
    }
    return { metricLabels: labels };
  }
  if (dogstatsd)
    throw r.error(
      "USE_DOG_STATSD",
      "sluice has no DogStatsD sink: set it to false and use USE_STATSD (plain statsd, the reference's names) or sluice's Prometheus metrics",
    );
  // The reference sends StatsD unless told not to; sluice does where the statsd variables show that intent
  // (with none of them set, sluice keeps its own default: no statsd).
  const statsdVars = ["USE_STATSD", "STATSD_HOST", "STATSD_PORT", STATSD_PROTOCOL].filter((v) => r.has(v));
  if (statsd && statsdVars.length > 0) {
    readStatsd(r, port, flushMs, rawTags);
  } else {
    for (const v of ["STATSD_HOST", "STATSD_PORT", STATSD_PROTOCOL]) r.ignore(v, "used only with USE_STATSD=true");
    r.ignore("STATS_FLUSH_INTERVAL", "used only with USE_STATSD=true: Prometheus reads sluice's metrics when it scrapes");
  }
  if (!prometheus) {
    for (const v of ["PROMETHEUS_ADDR", "PROMETHEUS_PATH", "PROMETHEUS_MAPPER_YAML", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"]) {
      r.ignore(v, "used only with USE_PROMETHEUS=true");
    }
    return { metricLabels: labels };
  }
  // Envoy Gateway sets it on every rate-limit Deployment it makes; the mapping renames statsd names, which
  // sluice's Prometheus metrics never were.
  r.ignore("PROMETHEUS_MAPPER_YAML", 'sluice\'s metric names are its own (docs/operating.md "Metrics"); a statsd-to-Prometheus mapping does not apply to them');
  if (r.bool("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", false)) {
    throw r.error("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "sluice's latency histograms are in seconds: unset it or set it to false");
  }
  const addr = goListenAddress(r.str("PROMETHEUS_ADDR", ":9090"));
  if (!addr) throw r.error("PROMETHEUS_ADDR", "takes [host]:port, e.g. :9090");
  const path = r.str("PROMETHEUS_PATH", "/metrics");
  if (!/^\/[\x21-\x7e]*$/.test(path) || path.includes("?")) throw r.error("PROMETHEUS_PATH", "must be a path starting with /");
  return { prometheus: { host: addr.host === "" ? "0.0.0.0" : addr.host, port: addr.port, path }, metricLabels: labels };
}

/** USE_STATSD honoured: SLUICE_STATSD* from the reference's variables and defaults, where sluice's own are unset. */
function readStatsd(r: ReferenceReader, port: number, flushMs: number, rawTags: string): void {
  const host = r.str("STATSD_HOST", "localhost");
  if (!/^[A-Za-z0-9.-]+$|^[0-9A-Fa-f:.]+$/.test(host)) throw r.error("STATSD_HOST", "must be a host name or an IP address");
  if (port === 0) throw r.error("STATSD_PORT", "must be a port from 1 to 65535 with USE_STATSD=true");
  const protocol = /^(tcp|udp)[46]?$/.exec(r.str(STATSD_PROTOCOL, "tcp"))?.[1];
  if (!protocol) throw r.error(STATSD_PROTOCOL, "must be tcp or udp (tcp4, tcp6, udp4, udp6 are taken as tcp and udp)");
  if (flushMs < 10) throw r.error("STATS_FLUSH_INTERVAL", "must be at least 10ms with USE_STATSD=true");
  if (!r.own(undefined, ENV.STATSD)) r.map(ENV.STATSD, host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);
  if (!r.own(undefined, ENV.STATSD_PROTOCOL)) r.map(ENV.STATSD_PROTOCOL, protocol);
  if (!r.own(undefined, ENV.STATSD_FLUSH_MS)) r.map(ENV.STATSD_FLUSH_MS, String(Math.round(flushMs)));
  if (rawTags !== "" && !r.own(undefined, ENV.STATSD_TAGS)) r.map(ENV.STATSD_TAGS, rawTags);
}
