// The OTLP span exporter for the configured protocol. Endpoint, headers, compression and certificates
// come from the standard OTEL_EXPORTER_OTLP_* variables, which the exporters read themselves.
import { OTLPTraceExporter as GrpcExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtobufExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import type { SpanExporter } from "@opentelemetry/sdk-trace";
import type { TracingSettings } from "./tracing-settings.js";

export function otlpExporter(s: TracingSettings): SpanExporter {
  const config = { timeoutMillis: s.exportTimeoutMs };
  if (s.protocol === "grpc") return new GrpcExporter(config);
  if (s.protocol === "http/json") return new JsonExporter(config);
  return new ProtobufExporter(config);
}
