// OpenTelemetry tracing of ShouldRateLimit (off unless --tracing otlp): one SERVER span per call, parented on
// the trace context the caller sent (W3C traceparent/tracestate, B3 single `b3` or multi `x-b3-*`), batched
// and exported over OTLP. A span carries the domain, the descriptor count, the decision, the store nodes
// that answered and their latency, and the call's latency: never a descriptor's key value or any other
// request value. Store calls reach the span through an AsyncLocalStorage entered only for traced calls.
import { AsyncLocalStorage } from "node:async_hooks";
import { diag, DiagLogLevel, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Attributes, type Span, type TextMapGetter, type Tracer } from "@opentelemetry/api";
import { CompositePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";
import { B3Propagator } from "@opentelemetry/propagator-b3";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider, type SpanExporter } from "@opentelemetry/sdk-trace";
import { ATTR_RPC_METHOD, ATTR_RPC_STATUS_CODE, ATTR_RPC_SYSTEM_NAME, RPC_SYSTEM_NAME_VALUE_GRPC } from "@opentelemetry/semantic-conventions";
import type { Logger } from "pino";
import type { Decision, RateLimitRequest } from "../limiter/types.js";
import { RLS_SERVICE } from "../core/rls.js";
import type { CallTracing, HeaderGetter, TracedCall } from "./call-tracing.js";
import type { TracingSettings } from "./tracing-settings.js";

const SPAN_NAME = `${RLS_SERVICE}/ShouldRateLimit`;
/** Store calls noted per span at most (a request has at most a few per descriptor and node). */
const MAX_STORE_CALLS = 64;

/** Attribute names of the call span (docs/operating.md "Tracing"). */
const SPAN_ATTRS = {
  domain: "ratelimit.domain",
  descriptors: "ratelimit.descriptors",
  decision: "ratelimit.decision",
  via: "ratelimit.via",
  shadowed: "ratelimit.shadowed",
  storeNodes: "ratelimit.store.nodes",
  storeMs: "ratelimit.store.duration_ms",
  storeOk: "ratelimit.store.ok",
  callMs: "ratelimit.duration_ms",
} as const;

export class Tracing implements CallTracing {
  private readonly provider: TracerProvider;
  private readonly tracer: Tracer;
  private readonly propagator = new CompositePropagator({
    // Both are read; where a call carries both, traceparent (extracted last) wins.
    propagators: [new B3Propagator(), new W3CTraceContextPropagator()],
  });
  private readonly current = new AsyncLocalStorage<TracedRateLimitCall>();

  constructor(s: TracingSettings, exporter: SpanExporter, logger: Logger) {
    // The SDK reports export failures through diag; they become log lines.
    const log = logger.child({ component: "tracing" });
    diag.setLogger(
      {
        error: (m, ...a) => log.error({ args: a.map(String) }, m),
        warn: (m, ...a) => log.warn({ args: a.map(String) }, m),
        info: () => {},
        debug: () => {},
        verbose: () => {},
      },
      { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
    );
    this.provider = new TracerProvider({
      resource: resourceFromAttributes(s.resource),
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(s.samplingRate) }),
      spanProcessors: [
        new BatchSpanProcessor({
          exporter,
          maxQueueSize: s.maxQueueSize,
          maxExportBatchSize: s.maxExportBatchSize,
          scheduledDelayMillis: s.scheduledDelayMs,
          exportTimeoutMillis: s.exportTimeoutMs,
        }),
      ],
    });
    this.tracer = this.provider.getTracer("sluice");
  }

  begin<Carrier>(carrier: Carrier, getter: HeaderGetter<Carrier>): TracedCall {
    const parent = this.propagator.extract(ROOT_CONTEXT, carrier, getter as TextMapGetter<Carrier>);
    const span = this.tracer.startSpan(SPAN_NAME, { kind: SpanKind.SERVER, attributes: RPC_ATTRS }, parent);
    return new TracedRateLimitCall(span, this.current);
  }

  /** A store call ended (store onCall): noted on the traced call it was made for, if any. */
  storeCall(node: string, seconds: number, ok: boolean): void {
    this.current.getStore()?.storeCall(node, seconds, ok);
  }

  /** Exports what is queued, then stops; bounded by the caller. */
  close(): Promise<void> {
    return this.provider.shutdown();
  }
}

const RPC_ATTRS: Attributes = { [ATTR_RPC_SYSTEM_NAME]: RPC_SYSTEM_NAME_VALUE_GRPC, [ATTR_RPC_METHOD]: SPAN_NAME };

class TracedRateLimitCall implements TracedCall {
  /** Made at the first store call: an unsampled call or one answered without the store allocates none. */
  private store: { nodes: string[]; ms: number[]; ok: boolean[] } | undefined = undefined;

  constructor(
    private readonly span: Span,
    private readonly current: AsyncLocalStorage<TracedRateLimitCall>,
  ) {}

  run<T>(decide: () => Promise<T>): Promise<T> {
    // An unsampled span records nothing: no reason to carry it through the store calls.
    return this.span.isRecording() ? this.current.run(this, decide) : decide();
  }

  storeCall(node: string, seconds: number, ok: boolean): void {
    const store = (this.store ??= { nodes: [], ms: [], ok: [] });
    if (store.nodes.length >= MAX_STORE_CALLS) return;
    store.nodes.push(node);
    store.ms.push(seconds * 1000);
    store.ok.push(ok);
  }

  decided(req: RateLimitRequest, decision: Decision, seconds: number): void {
    const span = this.span;
    if (span.isRecording()) {
      const via = [...new Set(decision.outcomes.map((o) => o.via))];
      span.setAttributes({
        ...this.requestAttributes(req),
        [SPAN_ATTRS.decision]: decision.code,
        [SPAN_ATTRS.via]: via,
        [SPAN_ATTRS.callMs]: seconds * 1000,
        [ATTR_RPC_STATUS_CODE]: "OK",
        ...(decision.shadowed ? { [SPAN_ATTRS.shadowed]: true } : {}),
      });
    }
    span.end();
  }

  failed(code: string, seconds: number, req?: RateLimitRequest): void {
    const span = this.span;
    if (span.isRecording()) {
      const status = code.toUpperCase();
      span.setAttributes({
        ...(req ? this.requestAttributes(req) : {}),
        [SPAN_ATTRS.decision]: status,
        [SPAN_ATTRS.callMs]: seconds * 1000,
        [ATTR_RPC_STATUS_CODE]: status,
      });
      span.setStatus({ code: SpanStatusCode.ERROR, message: status });
    }
    span.end();
  }

  /** What may be told of a request: its domain and how many descriptors; never a key's value. */
  private requestAttributes(req: RateLimitRequest): Attributes {
    const attrs: Attributes = { [SPAN_ATTRS.domain]: req.domain, [SPAN_ATTRS.descriptors]: req.descriptors.length };
    const store = this.store;
    if (store) {
      attrs[SPAN_ATTRS.storeNodes] = store.nodes;
      attrs[SPAN_ATTRS.storeMs] = store.ms;
      attrs[SPAN_ATTRS.storeOk] = store.ok;
    }
    return attrs;
  }
}
