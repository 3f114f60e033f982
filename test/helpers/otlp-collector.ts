// Test OTLP trace collectors: a real HTTP server on a free port taking POST /v1/traces as OTLP/JSON or
// OTLP/protobuf, or a real gRPC server taking TraceService/Export; each keeps every raw body and the
// spans decoded to one plain shape.
import http from "node:http";
import type net from "node:net";
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  traceState: string;
  name: string;
  /** OTLP SpanKind: 2 = SERVER. */
  kind: number;
  attributes: Record<string, unknown>;
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  resource: Record<string, unknown>;
}

export interface OtlpCollector {
  port: number;
  /** Where an exporter sends traces (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). */
  tracesUrl: string;
  spans: ReceivedSpan[];
  /** Every request body as received, and its content-type. */
  bodies: { contentType: string; body: Buffer }[];
  /** Resolves once at least n spans arrived (rejects after timeoutMs). */
  waitForSpans(n: number, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

// opentelemetry-proto's trace and common messages, the fields a span of sluice uses.
const PROTO = `
syntax = "proto3";
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message InstrumentationScope { string name = 1; string version = 2; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4; string name = 5;
  int32 kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9;
  uint32 dropped_attributes_count = 10; Status status = 15; fixed32 flags = 16;
}
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; ArrayValue array_value = 5; bytes bytes_value = 7; }
}
message ArrayValue { repeated AnyValue values = 1; }
`;
const ExportRequest = protobuf.parse(PROTO, { keepCase: false }).root.lookupType("ExportTraceServiceRequest");

/** What both collectors keep and how they are waited on. */
function received() {
  const spans: ReceivedSpan[] = [];
  const bodies: { contentType: string; body: Buffer }[] = [];
  const waiters = new Set<() => void>();
  return {
    spans,
    bodies,
    waiters,
    waitForSpans(n: number, timeoutMs = 15_000): Promise<ReceivedSpan[]> {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (spans.length < n) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(spans);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${spans.length} spans arrived, waited for ${n}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}

/** opentelemetry.proto.collector.trace.v1.TraceService/Export over gRPC (OTLP/gRPC); bodies kept as protobuf. */
export async function startOtlpGrpcCollector(): Promise<Omit<OtlpCollector, "tracesUrl"> & { url: string }> {
  const r = received();
  const raw = (b: Buffer) => b;
  const server = new grpc.Server();
  server.addService(
    {
      Export: {
        path: "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        requestStream: false,
        responseStream: false,
        requestSerialize: raw,
        requestDeserialize: raw,
        responseSerialize: raw,
        responseDeserialize: raw,
      },
    },
    {
      Export(call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) {
        r.bodies.push({ contentType: "application/grpc", body: call.request });
        r.spans.push(...decode("application/x-protobuf", call.request));
        callback(null, Buffer.alloc(0)); // an empty ExportTraceServiceResponse
        for (const w of r.waiters) w();
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    spans: r.spans,
    bodies: r.bodies,
    waitForSpans: r.waitForSpans,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const { spans, bodies, waiters, waitForSpans } = received();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const contentType = String(req.headers["content-type"] ?? "");
      bodies.push({ contentType, body });
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      try {
        spans.push(...decode(contentType, body));
      } catch (err) {
        res.writeHead(400).end(String(err));
        return;
      }
      const json = contentType.startsWith("application/json");
      res.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" }).end(json ? "{}" : Buffer.alloc(0));
      for (const w of waiters) w();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    tracesUrl: `http://127.0.0.1:${port}/v1/traces`,
    spans,
    bodies,
    waitForSpans,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function decode(contentType: string, body: Buffer): ReceivedSpan[] {
  if (contentType.startsWith("application/json")) return fromOtlp(JSON.parse(body.toString("utf8")), (id) => id ?? "");
  if (contentType.startsWith("application/x-protobuf")) {
    const msg = ExportRequest.toObject(ExportRequest.decode(body), { longs: Number, bytes: Array });
    return fromOtlp(msg, (id) => Buffer.from(id ?? []).toString("hex"));
  }
  throw new Error(`unexpected content-type ${contentType}`);
}

/** OTLP's JSON mapping and protobufjs's objects share the camelCase field names; ids differ (hex / bytes). */
function fromOtlp(msg: any, id: (raw: any) => string): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of msg.resourceSpans ?? []) {
    const resource = attributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: id(s.traceId),
          spanId: id(s.spanId),
          parentSpanId: id(s.parentSpanId),
          traceState: s.traceState ?? "",
          name: s.name,
          kind: s.kind,
          attributes: attributes(s.attributes),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? "" },
          resource,
        });
      }
    }
  }
  return out;
}

function attributes(list: any[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, anyValue(kv.value)]));
}

/** An AnyValue holds one of stringValue, intValue, doubleValue, boolValue, arrayValue, bytesValue. */
function anyValue(v: any): unknown {
  const field = Object.keys(v ?? {}).find((k) => k.endsWith("Value"));
  if (field === undefined) return undefined;
  if (field === "arrayValue") return (v.arrayValue.values ?? []).map(anyValue);
  if (field === "intValue") return Number(v.intValue);
  return v[field];
}
