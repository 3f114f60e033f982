// The unary calls of sluice's h2 transport (server.ts): RateLimitService.ShouldRateLimit and
// grpc.health.v1 Check, and the start of a Watch. Per call: one Call object, shared listener functions
// (no closures), a request decoded straight from the DATA bytes and an answer encoded straight from the
// Decision; the limiter's errors mapped to gRPC codes here.
import http2 from "node:http2";
import type { Logger } from "pino";
import type { Limiter } from "../../../limiter/limiter.js";
import { InvalidRequestError, type Decision, type RateLimitRequest } from "../../../limiter/types.js";
import { StoreUnavailableError } from "../../../store/store.js";
import { RLS_SERVICE, type CallObserver, type CallTracing, type HeaderGetter, type TracedCall } from "../grpc-contract.js";
import type { RequestBounds } from "../decode.js";
import { CALL, Call, CHECK, type CallHandler, onData, onDeadline, onEnd, onPartialClose, onWatchClose, RLS, sendTrailers, type Stream, WATCH } from "./call.js";
import { decodeRateLimitRequest } from "./decode-request.js";
import { encodeResponseMessage } from "./encode-response.js";
import { parseTimeout, type Fault } from "./framing.js";
import { HEALTH, HEALTH_FRAMES, isKnownService, requestedService } from "./health.js";
import type { HealthWatch } from "./health-watch.js";
import { ACCEPT_ENCODING, GRPC_STATUS, refusal } from "./refusals.js";
import type { Conn, SlowCall, SlowPeers } from "./slow-peers.js";
import { CONTENT_TYPE, STATUS_NAMES, trailersOnly } from "./status.js";

const RLS_PATH = `/${RLS_SERVICE}/ShouldRateLimit`;
const CHECK_PATH = "/grpc.health.v1.Health/Check";
const WATCH_PATH = "/grpc.health.v1.Health/Watch";

/** HEADERS of a successful answer; node takes a raw list as it is (no copy into an object). */
const RESPONSE_HEADERS = [":status", "200", "content-type", CONTENT_TYPE, "grpc-accept-encoding", ACCEPT_ENCODING];
const WITH_TRAILERS = { waitForTrailers: true, sendDate: false };
const END_STREAM = { endStream: true, sendDate: false };
const METHOD_NOT_ALLOWED = [":status", "405", "allow", "POST"];
const UNSUPPORTED_MEDIA_TYPE = [":status", "415"];
const { NGHTTP2_CANCEL } = http2.constants;

/** A health request is a service name: no reason to hold more than this for one. */
const MAX_HEALTH_MESSAGE_BYTES = 64 * 1024;
/** Longest grpc-timeout honoured (node's timer limit); a longer one means no deadline. */
const MAX_DEADLINE_MS = 2 ** 31 - 1;

export interface UnaryOptions {
  limiter: Limiter;
  logger: Logger;
  observer: CallObserver | undefined;
  tracing: CallTracing | undefined;
  maxMessageBytes: number;
  bounds: RequestBounds;
}

export class UnaryCalls implements CallHandler {
  /** Calls the limiter has not returned: shutdown waits for them (their store calls would fail after it). */
  private readonly deciding = new Set<Call>();
  private onIdle: (() => void) | undefined;
  private readonly limiter: Limiter;
  private readonly logger: Logger;
  private readonly observer: CallObserver | undefined;
  private readonly tracing: CallTracing | undefined;
  private readonly maxMessageBytes: number;
  private readonly bounds: RequestBounds;
  private readonly decideFailed = (err: unknown) => this.logger.error({ err }, "ShouldRateLimit failed after answering");

  constructor(
    o: UnaryOptions,
    private readonly slow: SlowPeers,
    private readonly health: HealthWatch,
  ) {
    this.limiter = o.limiter;
    this.logger = o.logger;
    this.observer = o.observer;
    this.tracing = o.tracing;
    this.maxMessageBytes = o.maxMessageBytes;
    this.bounds = o.bounds;
  }

  /** A new stream for one of the unary paths (or none: it is answered UNIMPLEMENTED), on `conn` (slow-peers.ts connOf). */
  start(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, conn: Conn | undefined): void {
    try {
      const path = headers[":path"];
      const route = path === RLS_PATH ? RLS : path === CHECK_PATH ? CHECK : path === WATCH_PATH ? WATCH : -1;
      // Every stream gets a Call, also those refused from their headers: what the client still sends
      // is read and dropped, and the body timeout bounds how long.
      const call = new Call(this, stream, route, performance.now());
      (stream as Stream)[CALL] = call;
      stream.on("data", onData);
      stream.on("end", onEnd);
      this.slow.started(call, conn);

      if (headers[":method"] !== "POST") return this.answerHttp(call, 405);
      const contentType = headers["content-type"];
      if (contentType !== "application/grpc" && !isGrpcProto(contentType)) return this.answerHttp(call, 415);
      if (route < 0) return this.answerError(call, GRPC_STATUS.UNIMPLEMENTED, refusal.unknownMethod(path ?? ""));
      const encoding = headers["grpc-encoding"];
      if (encoding !== undefined && encoding !== "identity") {
        return this.fail(call, { code: GRPC_STATUS.UNIMPLEMENTED, message: refusal.unsupportedEncoding(String(encoding)) });
      }
      const timeout = headers["grpc-timeout"];
      if (timeout !== undefined) {
        const timeoutMs = parseTimeout(String(timeout));
        if (Number.isNaN(timeoutMs)) return this.fail(call, { code: GRPC_STATUS.INTERNAL, message: `invalid grpc-timeout ${timeout}` });
        // Already passed: answered now, not raced against a fast decision by a 0 ms timer.
        if (timeoutMs <= 0) return this.fail(call, { code: GRPC_STATUS.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
        if (timeoutMs <= MAX_DEADLINE_MS) call.deadline = setTimeout(onDeadline, Math.ceil(timeoutMs), call);
      }
      if (this.tracing !== undefined && route === RLS) call.traced = this.tracing.begin(headers, HEADERS_GETTER);
    } catch (err) {
      this.broken(stream, err);
    }
  }

  /** A DATA chunk of the request. */
  take(call: Call, chunk: Buffer): void {
    if (call.answered) return;
    const before = call.held;
    const fault = call.take(chunk, call.route === RLS ? this.maxMessageBytes : Math.min(this.maxMessageBytes, MAX_HEALTH_MESSAGE_BYTES));
    const grown = call.held - before;
    const slow = this.slow;
    slow.heldBytes += grown;
    if (fault) return this.fail(call, fault);
    if (grown > 0) {
      if (before === 0) call.stream.once("close", onPartialClose); // a reset stream gives its bytes back
      if (slow.heldBytes > slow.heldBudget) {
        this.fail(call, {
          code: GRPC_STATUS.RESOURCE_EXHAUSTED,
          message: `server is holding ${slow.heldBytes} bytes of partly received requests, more than ${slow.heldBudget}; retry later`,
        });
      }
    }
  }

  /** The request ended (END_STREAM): exactly one message must have come. */
  ended(call: Call): void {
    call.requestEnded = true;
    this.slow.stopWaiting(call);
    if (call.answered) return;
    const fault = call.finish();
    if (fault) return this.fail(call, fault);
    const message = call.message!;
    call.message = null; // a view of node's read buffer: held with the call, it would keep that buffer
    if (call.route === RLS) {
      this.decide(call, message).catch(this.decideFailed);
      return;
    }
    const service = requestedService(message);
    if (typeof service !== "string") return this.fail(call, service);
    const known = isKnownService(service);
    if (call.route === CHECK) {
      if (!known) return this.answerError(call, GRPC_STATUS.NOT_FOUND, refusal.unknownHealthService(service));
      return this.answer(call, HEALTH_FRAMES[this.health.serving ? HEALTH.SERVING : HEALTH.NOT_SERVING]);
    }
    this.watch(call, known);
  }

  /** Decode, decide, answer; the observer (and the trace) hear the outcome (also when the deadline answered first). */
  private async decide(call: Call, message: Buffer): Promise<void> {
    call.deciding = true;
    this.deciding.add(call);
    const traced = call.traced;
    let req: RateLimitRequest | undefined;
    let decision: Decision;
    let frame: Buffer;
    try {
      req = decodeRateLimitRequest(message, this.bounds);
      decision = await (traced === undefined ? this.limiter.shouldRateLimit(req) : decideTraced(traced, this.limiter, req));
      frame = encodeResponseMessage(decision);
    } catch (err) {
      this.deciding.delete(call);
      const fault = this.faultOf(err);
      this.answerError(call, fault.code, fault.message);
      const seconds = (performance.now() - call.since) / 1000;
      this.observer?.failed(STATUS_NAMES[fault.code], seconds);
      traced?.failed(STATUS_NAMES[fault.code], seconds, req);
      this.maybeIdle();
      return;
    }
    this.deciding.delete(call);
    this.answer(call, frame);
    if (this.observer || traced) {
      const seconds = (performance.now() - call.since) / 1000;
      this.observer?.decided(req, decision, seconds);
      traced?.decided(req, decision, seconds);
    }
    this.maybeIdle();
  }

  private faultOf(err: unknown): Fault {
    if (err instanceof InvalidRequestError) return { code: GRPC_STATUS.INVALID_ARGUMENT, message: err.message };
    if (err instanceof StoreUnavailableError) {
      return { code: GRPC_STATUS.UNAVAILABLE, message: `rate-limit store unavailable: ${err.message}` };
    }
    this.logger.error({ err }, "ShouldRateLimit failed");
    return { code: GRPC_STATUS.INTERNAL, message: "internal error" };
  }

  /** A call ended by the transport before the limiter had it: answered, and the observer hears it. */
  private fail(call: Call, fault: Fault): void {
    this.answerError(call, fault.code, fault.message);
    if (call.route === RLS && !call.deciding) this.failedBeforeDeciding(call, STATUS_NAMES[fault.code]);
  }

  private failedBeforeDeciding(call: Call, code: string): void {
    const seconds = (performance.now() - call.since) / 1000;
    this.observer?.failed(code, seconds);
    call.traced?.failed(code, seconds);
  }

  /** Headers, one message, trailers grpc-status 0. */
  private answer(call: Call, frame: Buffer): void {
    if (call.answered) return;
    this.finishCall(call);
    const s = call.stream;
    if (s.destroyed || s.closed) return;
    s.respond(RESPONSE_HEADERS, WITH_TRAILERS);
    s.on("wantTrailers", sendTrailers); // `on`, not `once`: no wrapper per call
    s.end(frame);
    this.slow.awaitWrite(call, frame.length);
  }

  /**
   * A trailers-only answer. A request still being sent is read to its end and dropped, not reset with
   * NO_ERROR (RFC 9113 8.1 allows that, but node's client then never closes a stream with unsent
   * data); the body timeout still cuts one that does not end.
   */
  answerError(call: Call, code: number, message: string): void {
    if (call.answered) return;
    this.finishCall(call);
    const s = call.stream;
    if (s.destroyed || s.closed) return;
    s.respond(trailersOnly(code, message), END_STREAM);
  }

  /** Not a gRPC request at all (PROTOCOL-HTTP2.md: 415 for a wrong content-type): an HTTP status, no body. */
  private answerHttp(call: Call, status: 405 | 415): void {
    this.finishCall(call);
    const s = call.stream;
    if (s.destroyed || s.closed) return;
    s.respond(status === 405 ? METHOD_NOT_ALLOWED : UNSUPPORTED_MEDIA_TYPE, END_STREAM);
  }

  /** Answered (or cut): no deadline, no held bytes; it leaves the body-timeout list once its request ends. */
  private finishCall(call: Call): void {
    call.answered = true;
    if (call.deadline) clearTimeout(call.deadline);
    call.deadline = undefined;
    if (call.requestEnded) this.slow.stopWaiting(call);
    this.release(call);
  }

  release(call: Call): void {
    this.slow.heldBytes -= call.held;
    call.release();
  }

  deadlinePassed(call: Call): void {
    call.deadline = undefined;
    // An open Watch stream ends with the status in its trailers.
    if (call.route === WATCH && this.health.expired(call)) return;
    // The limiter's work cannot be cancelled; its outcome still reaches the observer.
    this.fail(call, { code: GRPC_STATUS.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
  }

  broken(stream: Stream, err: unknown): void {
    this.logger.error({ err }, "gRPC stream failed");
    if (!stream.destroyed) stream.destroy();
  }

  /** Health Watch: the unary part is done; what follows is the stream of statuses (health-watch.ts). */
  private watch(call: Call, known: boolean): void {
    const s = call.stream;
    call.answered = true;
    this.slow.stopWaiting(call);
    if (s.destroyed || s.closed) return;
    s.respond(RESPONSE_HEADERS, WITH_TRAILERS);
    s.on("wantTrailers", sendTrailers);
    s.once("close", onWatchClose);
    this.health.add(call, known);
  }

  /** Its stream closed: written, or reset by either side. */
  closed(call: Call): void {
    this.slow.closed(call);
  }

  unwatch(call: Call): void {
    this.health.remove(call);
    if (call.deadline) clearTimeout(call.deadline);
    call.deadline = undefined;
  }

  /** Its request has not ended bodyTimeoutMs after its headers (slow-peers.ts): RST_STREAM CANCEL. */
  readonly cutSlowBody = (slowCall: SlowCall): void => {
    const call = slowCall as Call;
    const s = call.stream;
    const told = call.answered; // answered early (the observer heard then), the rest of the body never came
    this.finishCall(call);
    if (s.destroyed || s.closed) return; // reset by the client: nothing to answer, nobody to tell
    if (call.route === RLS && !told) this.failedBeforeDeciding(call, STATUS_NAMES[GRPC_STATUS.CANCELLED]);
    s.close(NGHTTP2_CANCEL);
  };

  /** Resolves once no call is with the limiter. */
  idle(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.onIdle = resolve;
      this.maybeIdle();
    });
  }

  private maybeIdle(): void {
    if (this.onIdle && this.deciding.size === 0) this.onIdle();
  }

  /** Grace is over: every call still open is reset with CANCEL (no status: the client knows it was cut). */
  cutAll(): void {
    const open: Call[] = [...this.deciding, ...(this.slow.bodies.items() as Call[])];
    for (const call of open) {
      this.slow.stopWaiting(call);
      this.finishCall(call);
      if (!call.stream.destroyed && !call.stream.closed) call.stream.close(NGHTTP2_CANCEL);
    }
  }
}

/** Apart from decide(): a closure there would cost a context per call also with tracing off. */
function decideTraced(traced: TracedCall, limiter: Limiter, req: RateLimitRequest): Promise<Decision> {
  return traced.run(() => limiter.shouldRateLimit(req));
}

/** node's request headers as the trace propagators read them. */
const HEADERS_GETTER: HeaderGetter<http2.IncomingHttpHeaders> = {
  get: (headers, name) => headers[name],
  keys: (headers) => Object.keys(headers),
};

/** application/grpc or application/grpc+proto, parameters allowed; anything else is not for this server. */
function isGrpcProto(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const semi = contentType.indexOf(";");
  const media = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return media === "application/grpc" || media === "application/grpc+proto";
}
