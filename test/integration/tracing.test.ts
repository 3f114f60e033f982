// OpenTelemetry tracing of a real `sluice serve` (real Redis) against a real OTLP/HTTP collector on a free
// port: calls over real gRPC carry W3C traceparent/tracestate, B3 single and B3 multi headers, or none; the
// spans received name exactly the parent trace and span, carry exact attributes, and no descriptor value
// appears anywhere in what was exported. The reference's TRACING_* variables with
// OTLP/protobuf; the last spans exported at shutdown.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { startOtlpCollector, startOtlpGrpcCollector, type OtlpCollector, type ReceivedSpan } from "../helpers/otlp-collector.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";

// A token bucket of 2 per day: the third call of one user is refused by the store.
const RULES = `
domain: tr
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 2, algorithm: token_bucket}
`;
/** Descriptor values: none may reach the collector. */
const SECRETS = ["secret-alpha-7f3", "secret-beta-91c", "secret-gamma-0d2"];
const SPAN_NAME = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
const SERVER = 2;
const ERROR = 2;

const W3C = { trace: "4bf92f3577b34da6a3ce929d0e0e4736", span: "00f067aa0ba902b7" };
const B3_SINGLE = { trace: "80f198ee56343ba864fe8b2a57d3eff7", span: "e457b5a2e4d86bd1" };
const B3_MULTI = { trace: "463ac35c9f6413ad48485a3953bb6124", span: "0020000000000001" };
const UNSAMPLED = { trace: "0af7651916cd43dd8448eb211c80319c", span: "b7ad6b7169203331" };

describe("tracing (OTLP/JSON)", () => {
  let redis: RedisProcess;
  let collector: OtlpCollector;
  let sluice: SluiceProcess;
  let client: RlsClient;

  beforeAll(async () => {
    redis = await startRedis();
    collector = await startOtlpCollector();
    sluice = await startSluice(["--config", ruleDir({ "tr.yaml": RULES }), "--redis", redis.url, "--tracing", "otlp"], {
      SLUICE_STORE_TIMEOUT_MS: "5000",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: collector.tracesUrl,
      OTEL_BSP_SCHEDULE_DELAY: "20",
      OTEL_SERVICE_NAME: "sluice-under-test",
      OTEL_RESOURCE_ATTRIBUTES: "service.namespace=edge,deployment.environment=test",
    });
    client = rlsClient(sluice.port);
  });

  afterAll(async () => {
    client?.close();
    await sluice?.stop();
    await collector?.close();
    await redis?.stop();
  });

  it("one span per call, parented on traceparent, b3 and x-b3-*, a root span without context, exact attributes, no descriptor value exported", async () => {
    const req = (user: string) => ({ domain: "tr", descriptors: [descriptor({ user })] });
    // Not sampled by its parent: no span. Sent first, so that it would be in the first batch if exported.
    expect((await client.shouldRateLimit(req(SECRETS[2]), 10_000, { traceparent: `00-${UNSAMPLED.trace}-${UNSAMPLED.span}-00` })).overall_code).toBe(OK);
    const answers = [
      await client.shouldRateLimit(req(SECRETS[0]), 10_000, { traceparent: `00-${W3C.trace}-${W3C.span}-01`, tracestate: "vendor=opaque,other=1" }),
      await client.shouldRateLimit(req(SECRETS[0]), 10_000, { b3: `${B3_SINGLE.trace}-${B3_SINGLE.span}-1` }),
      await client.shouldRateLimit(req(SECRETS[0]), 10_000, { "x-b3-traceid": B3_MULTI.trace, "x-b3-spanid": B3_MULTI.span, "x-b3-sampled": "1" }),
      await client.shouldRateLimit(req(SECRETS[1])),
    ];
    expect(answers.map((a) => a.overall_code)).toEqual([OK, OK, OVER_LIMIT, OK]);
    await expect(client.shouldRateLimit({ domain: "", descriptors: [descriptor({ user: SECRETS[1] })] })).rejects.toMatchObject({ code: 3 });

    const spans = await collector.waitForSpans(5);
    expect(spans).toHaveLength(5);
    const byTrace = (traceId: string) => spans.filter((s) => s.traceId === traceId);
    expect(byTrace(UNSAMPLED.trace)).toEqual([]);

    const node = `127.0.0.1:${redis.port}`;
    const decided = (decision: string): Record<string, unknown> => ({
      "rpc.system.name": "grpc",
      "rpc.method": SPAN_NAME,
      "rpc.status_code": "OK",
      "ratelimit.domain": "tr",
      "ratelimit.descriptors": 1,
      "ratelimit.decision": decision,
      "ratelimit.via": ["store"],
      "ratelimit.store.nodes": [node],
      "ratelimit.store.ok": [true],
    });
    const [w3c] = byTrace(W3C.trace);
    expect(shape(w3c)).toEqual({
      parentSpanId: W3C.span,
      traceState: "vendor=opaque,other=1",
      name: SPAN_NAME,
      kind: SERVER,
      status: { code: 0, message: "" },
      attributes: decided("OK"),
    });
    const [single] = byTrace(B3_SINGLE.trace);
    expect(shape(single)).toEqual({
      parentSpanId: B3_SINGLE.span,
      traceState: "",
      name: SPAN_NAME,
      kind: SERVER,
      status: { code: 0, message: "" },
      attributes: decided("OK"),
    });
    const [multi] = byTrace(B3_MULTI.trace);
    expect(shape(multi)).toEqual({
      parentSpanId: B3_MULTI.span,
      traceState: "",
      name: SPAN_NAME,
      kind: SERVER,
      status: { code: 0, message: "" },
      attributes: decided("OVER_LIMIT"),
    });

    const roots = spans.filter((s) => ![W3C.trace, B3_SINGLE.trace, B3_MULTI.trace].includes(s.traceId));
    expect(roots).toHaveLength(2);
    for (const r of roots) {
      expect(r.parentSpanId).toBe("");
      expect(r.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(r.traceId).not.toBe("0".repeat(32));
    }
    const [root, failed] = roots;
    expect(shape(root).attributes).toEqual(decided("OK"));
    expect(shape(failed)).toEqual({
      parentSpanId: "",
      traceState: "",
      name: SPAN_NAME,
      kind: SERVER,
      status: { code: ERROR, message: "INVALID_ARGUMENT" },
      attributes: { "rpc.system.name": "grpc", "rpc.method": SPAN_NAME, "rpc.status_code": "INVALID_ARGUMENT", "ratelimit.decision": "INVALID_ARGUMENT" },
    });

    // Latencies: present, positive, within a generous bound; the store's within the call's.
    for (const s of [w3c, single, multi, root]) {
      const [storeMs] = s.attributes["ratelimit.store.duration_ms"] as number[];
      const callMs = s.attributes["ratelimit.duration_ms"] as number;
      expect(storeMs).toBeGreaterThan(0);
      expect(callMs).toBeGreaterThanOrEqual(storeMs);
      expect(callMs).toBeLessThan(10_000);
    }
    expect(w3c.resource).toMatchObject({ "service.name": "sluice-under-test", "service.namespace": "edge", "deployment.environment": "test" });
    expect(w3c.resource["service.instance.id"]).toMatch(/^[0-9a-f-]{36}$/);

    // The exported bytes, all of them: no descriptor value, no descriptor key.
    expect(collector.bodies.every((b) => b.contentType.startsWith("application/json"))).toBe(true);
    const exported = Buffer.concat(collector.bodies.map((b) => b.body)).toString("utf8");
    for (const secret of SECRETS) expect(exported).not.toContain(secret);
    expect(exported).not.toContain('"user"');
  });
});

describe("the reference's TRACING_* variables (OTLP/protobuf) and the last spans at shutdown", () => {
  it("TRACING_ENABLED=true exports to OTEL_EXPORTER_OTLP_ENDPOINT as service RateLimit; a span still queued is exported when sluice stops", async () => {
    const redis = await startRedis();
    const collector = await startOtlpCollector();
    try {
      const sluice = await startSluice(["--config", ruleDir({ "tr.yaml": RULES }), "--redis", redis.url], {
        TRACING_ENABLED: "true",
        TRACING_SERVICE_NAMESPACE: "ref-ns",
        TRACING_SERVICE_INSTANCE_ID: "pod-7",
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.port}`,
        // An hour between exports: only the flush at shutdown sends the span.
        OTEL_BSP_SCHEDULE_DELAY: "3600000",
      });
      const client = rlsClient(sluice.port);
      try {
        const res = await client.shouldRateLimit({ domain: "tr", descriptors: [descriptor({ user: SECRETS[0] })] }, 10_000, {
          traceparent: `00-${W3C.trace}-${W3C.span}-01`,
        });
        expect(res.overall_code).toBe(OK);
      } finally {
        client.close();
      }
      expect(collector.spans).toEqual([]);
      expect(await sluice.stop()).toBe(0);
      expect(collector.bodies.map((b) => b.contentType)).toEqual(["application/x-protobuf"]);
      expect(collector.spans).toHaveLength(1);
      const [span] = collector.spans;
      expect([span.traceId, span.parentSpanId, span.attributes["ratelimit.decision"], span.attributes["ratelimit.store.nodes"]]).toEqual([
        W3C.trace,
        W3C.span,
        "OK",
        [`127.0.0.1:${redis.port}`],
      ]);
      expect(span.resource).toMatchObject({ "service.name": "RateLimit", "service.namespace": "ref-ns", "service.instance.id": "pod-7" });
      expect(collector.bodies[0].body.includes(Buffer.from(SECRETS[0]))).toBe(false);
    } finally {
      await collector.close();
      await redis.stop();
    }
  });
});

describe("OTLP/gRPC and the sampling rate (memory store)", () => {
  it("rate 0: a call without a parent is not traced, a call whose parent is sampled is; exported over gRPC without store attributes", async () => {
    const collector = await startOtlpGrpcCollector();
    try {
      const sluice = await startSluice(["--config", ruleDir({ "tr.yaml": RULES })], {
        SLUICE_TRACING: "otlp",
        SLUICE_TRACING_SAMPLING_RATE: "0",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_BSP_SCHEDULE_DELAY: "20",
      });
      const client = rlsClient(sluice.port);
      try {
        const req = { domain: "tr", descriptors: [descriptor({ user: SECRETS[0] })] };
        expect((await client.shouldRateLimit(req)).overall_code).toBe(OK);
        expect((await client.shouldRateLimit(req, 10_000, { traceparent: `00-${W3C.trace}-${W3C.span}-01` })).overall_code).toBe(OK);
        const spans = await collector.waitForSpans(1);
        expect(spans.map((s) => [s.traceId, s.parentSpanId])).toEqual([[W3C.trace, W3C.span]]);
        expect(shape(spans[0]).attributes).toEqual({
          "rpc.system.name": "grpc",
          "rpc.method": SPAN_NAME,
          "rpc.status_code": "OK",
          "ratelimit.domain": "tr",
          "ratelimit.descriptors": 1,
          "ratelimit.decision": "OK",
          "ratelimit.via": ["store"],
        });
        expect(spans[0].resource["service.name"]).toBe("sluice");
        expect(collector.bodies.some((b) => b.body.includes(Buffer.from(SECRETS[0])))).toBe(false);
      } finally {
        client.close();
        await sluice.stop();
      }
    } finally {
      await collector.close();
    }
  });
});

/** A span without its own ids and latencies (checked apart). */
function shape(s: ReceivedSpan) {
  const { "ratelimit.duration_ms": _call, "ratelimit.store.duration_ms": _store, ...attributes } = s.attributes;
  return { parentSpanId: s.parentSpanId, traceState: s.traceState, name: s.name, kind: s.kind, status: s.status, attributes };
}
