// --tracing / SLUICE_TRACING, SLUICE_TRACING_SAMPLING_RATE and OpenTelemetry's own variables -> TracingSettings.
// The reference's TRACING_* arrive here mapped onto these (settings/reference/telemetry.ts). The OTLP exporter
// itself reads OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _COMPRESSION and the certificate files;
// they are checked here so that a wrong value stops the start instead of losing every span.
import { ENV, readText, SETTINGS } from "../core/settings-table.js";
import { randomUUID } from "node:crypto";
import { goFloat } from "../core/go-values.js";
import { UsageError } from "../core/usage-error.js";

const OTLP_PROTOCOLS = ["http/protobuf", "http/json", "grpc"] as const;
type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

export interface TracingSettings {
  protocol: OtlpProtocol;
  /** Resource attributes: service.name, service.namespace, service.instance.id, and OTEL_RESOURCE_ATTRIBUTES. */
  resource: Record<string, string>;
  /** Share of root calls traced (0..1); a call with a parent follows the parent's sampled flag. */
  samplingRate: number;
  /** Batch span processor: spans queued at most (more are dropped), per export, ms between exports. */
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMs: number;
  /** One export (an HTTP request or gRPC call to the collector) is given up after this. */
  exportTimeoutMs: number;
}

/** Settings, undefined when tracing is off; a bad value throws UsageError naming the setting. */
export function tracingSettings(flag: string | undefined, env: NodeJS.ProcessEnv): TracingSettings | undefined {
  if (readText(env, SETTINGS.TRACING, flag) === "off") return undefined;

  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || "http/protobuf";
  if (!(OTLP_PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new UsageError(
      `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL must be one of ${OTLP_PROTOCOLS.join(", ")}, got '${protocol}'`,
      "OTEL_EXPORTER_OTLP_PROTOCOL",
    );
  }
  for (const name of ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"]) {
    const url = env[name];
    if (url && !(URL.canParse(url) && /^https?:$/.test(new URL(url).protocol)))
      throw new UsageError(`${name} must be an http:// or https:// URL, got '${url}'`, name);
  }
  const rawRate = env[ENV.TRACING_SAMPLING_RATE];
  const samplingRate = rawRate === undefined || rawRate === "" ? SETTINGS.TRACING_SAMPLING_RATE.default : goFloat(rawRate);
  if (samplingRate === undefined || !(samplingRate >= 0 && samplingRate <= 1)) {
    throw new UsageError(`SLUICE_TRACING_SAMPLING_RATE must be a number from 0 to 1, got '${rawRate}'`, ENV.TRACING_SAMPLING_RATE);
  }
  const resource = resourceAttributes(env);
  if (typeof resource === "string") throw new UsageError(resource, "OTEL_RESOURCE_ATTRIBUTES");

  const ints: [string, number, number, number][] = [
    ["OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1, 1_000_000],
    ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1, 1_000_000],
    ["OTEL_BSP_SCHEDULE_DELAY", 5000, 1, 3_600_000],
    ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 0, 1, 600_000],
    ["OTEL_EXPORTER_OTLP_TIMEOUT", 10_000, 1, 600_000],
  ];
  const v: Record<string, number> = {};
  for (const [name, fallback, min, max] of ints) {
    const raw = env[name];
    const n = raw === undefined || raw === "" ? fallback : Number(raw);
    if (raw !== undefined && raw !== "" && (!Number.isInteger(n) || n < min || n > max))
      throw new UsageError(`${name} must be an integer from ${min} to ${max}, got '${raw}'`, name);
    v[name] = n;
  }
  if (v.OTEL_BSP_MAX_EXPORT_BATCH_SIZE > v.OTEL_BSP_MAX_QUEUE_SIZE) {
    throw new UsageError(
      `OTEL_BSP_MAX_EXPORT_BATCH_SIZE (${v.OTEL_BSP_MAX_EXPORT_BATCH_SIZE}) must not exceed OTEL_BSP_MAX_QUEUE_SIZE (${v.OTEL_BSP_MAX_QUEUE_SIZE})`,
      "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    );
  }
  return {
    protocol: protocol as OtlpProtocol,
    resource,
    samplingRate,
    maxQueueSize: v.OTEL_BSP_MAX_QUEUE_SIZE,
    maxExportBatchSize: v.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
    scheduledDelayMs: v.OTEL_BSP_SCHEDULE_DELAY,
    exportTimeoutMs: v.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT || v.OTEL_EXPORTER_OTLP_TIMEOUT,
  };
}

/**
 * OTEL_RESOURCE_ATTRIBUTES (key=value,... percent-encoded) and OTEL_SERVICE_NAME, which wins for
 * service.name. service.instance.id is a random UUID unless given (as the reference does).
 */
function resourceAttributes(env: NodeJS.ProcessEnv): Record<string, string> | string {
  const attrs: Record<string, string> = { "service.name": "sluice" };
  const raw = env.OTEL_RESOURCE_ATTRIBUTES ?? "";
  for (const pair of raw
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")) {
    const eq = pair.indexOf("=");
    let key: string;
    let value: string;
    try {
      key = decodeURIComponent(pair.slice(0, eq).trim());
      value = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      return `OTEL_RESOURCE_ATTRIBUTES: '${pair}' is not percent-encoded properly`;
    }
    if (eq <= 0 || key === "") return `OTEL_RESOURCE_ATTRIBUTES takes key=value[,key=value...], got '${pair}'`;
    attrs[key] = value;
  }
  if (env.OTEL_SERVICE_NAME) attrs["service.name"] = env.OTEL_SERVICE_NAME;
  attrs["service.instance.id"] ??= randomUUID();
  return attrs;
}
