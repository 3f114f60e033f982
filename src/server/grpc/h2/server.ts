// sluice's own unary gRPC transport on node:http2 (a StartTransport, server/grpc-contract.ts):
// RateLimitService.ShouldRateLimit and grpc.health.v1 Check / Watch on one port. gRPC over HTTP/2 as
// grpc/grpc doc/PROTOCOL-HTTP2.md says; the limiter's errors mapped to gRPC codes here. Per call: one Call object, shared
// listener functions (no closures), a request decoded straight from the DATA bytes and an answer
// encoded straight from the Decision.
import http2 from "node:http2";
import type net from "node:net";
import type { Logger } from "pino";
import type { Limiter } from "../../../limiter/limiter.js";
import { InvalidRequestError, type Decision, type RateLimitRequest } from "../../../limiter/types.js";
import { StoreUnavailableError } from "../../../store/store.js";
import {
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_KEEPALIVE,
  DEFAULT_MAX_CONCURRENT_STREAMS,
  DEFAULT_WRITE_TIMEOUT_MS,
  RLS_SERVICE,
  type CallObserver,
  type CallTracing,
  type CutReason,
  type CutScope,
  type HeaderGetter,
  type RunningTransport,
  type StartTransport,
  type TracedCall,
  type TransportOptions,
} from "../grpc-contract.js";
import { decodeRateLimitRequest } from "./decode-request.js";
import { encodeResponseMessage } from "./encode-response.js";
import { parseTimeout, UnaryBody, type Fault } from "./framing.js";
import { HEALTH, HEALTH_FRAMES, isKnownService, requestedService } from "./health.js";
import { keepSessionAlive } from "./keepalive.js";
import { limitSessionAge } from "./connection-age.js";
import { ACCEPT_ENCODING, refusal } from "./refusals.js";
import { StreamCalls } from "./stream-calls.js";
import { CONTENT_TYPE, Status, STATUS_NAMES, trailersOnly } from "./status.js";

const RLS_PATH = `/${RLS_SERVICE}/ShouldRateLimit`;
const CHECK_PATH = "/grpc.health.v1.Health/Check";
const WATCH_PATH = "/grpc.health.v1.Health/Watch";
const RLS = 0;
const CHECK = 1;
const WATCH = 2;

/** HEADERS of a successful answer; node takes a raw list as it is (no copy into an object). */
const RESPONSE_HEADERS = [":status", "200", "content-type", CONTENT_TYPE, "grpc-accept-encoding", ACCEPT_ENCODING];
const OK_TRAILERS = { "grpc-status": "0" };
const WITH_TRAILERS = { waitForTrailers: true, sendDate: false };
const END_STREAM = { endStream: true, sendDate: false };
const METHOD_NOT_ALLOWED = [":status", "405", "allow", "POST"];
const UNSUPPORTED_MEDIA_TYPE = [":status", "415"];
const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_REFUSED_STREAM } = http2.constants;

/** A health request is a service name: no reason to hold more than this for one. */
const MAX_HEALTH_MESSAGE_BYTES = 64 * 1024;
/** Partly received request bytes held across all connections; beyond, a call is refused (RESOURCE_EXHAUSTED). */
const MIN_HELD_BUDGET = 64 << 20;
/**
 * SETTINGS_MAX_HEADER_LIST_SIZE: Envoy's rate-limit calls carry a few hundred bytes of headers. What
 * well-behaved peers are told; node itself refuses (REFUSED_STREAM) header lists over 64 KiB.
 */
const MAX_HEADER_LIST_BYTES = 16 * 1024;
/** A TLS handshake not done by then is dropped (node's default is 120 s). */
const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;
/** After the grace period, how long sessions get to send their RST_STREAMs before their sockets go. */
const FINAL_FRAMES_MS = 100;
/** Longest grpc-timeout honoured (node's timer limit); a longer one means no deadline. */
const MAX_DEADLINE_MS = 2 ** 31 - 1;
/**
 * What an answer waiting to be written holds besides its own bytes: its stream's state in JS and in node's
 * HTTP/2 layer (about 3 KiB measured on Node 24 once the request bytes are let go, rounded up).
 */
const HELD_STREAM_BYTES = 4096;
/**
 * Answers a client's flow-control window may hold back on one connection, counted as above (64 answers).
 * At it, the connection's new calls are refused before any work (RST_STREAM REFUSED_STREAM: not processed,
 * safe to retry), and once HELD_GRACE_MS pass in which not one of its answers was written, the connection goes
 * (GOAWAY ENHANCE_YOUR_CALM, then closed). Envoy's windows are megabytes: it never comes near.
 */
const MAX_HELD_BYTES_PER_CONNECTION = 256 * 1024;
/**
 * Far longer than a client takes to send WINDOW_UPDATE for what it reads, or a stall of it or of this process;
 * far past Envoy's timeout for its calls; short enough that the memory comes back soon.
 */
const HELD_GRACE_MS = 2000;
/** The smallest answer (a 5-byte prefix, overall_code OK): a window smaller than it holds back every answer. */
const MIN_ANSWER_BYTES = 7;

const CALL = Symbol("sluice.call");
type Stream = http2.ServerHttp2Stream & { [CALL]?: Call };
const CONN = Symbol("sluice.conn");
type Session = http2.ServerHttp2Session & { [CONN]?: Conn };

/**
 * One client connection: what its flow-control window holds back (answers larger than its initial stream
 * window, and calls that cannot be answered through a window smaller than any answer), in bytes as
 * HELD_STREAM_BYTES counts; and the check once that is over the bound.
 */
class Conn {
  held = 0;
  /** The client's SETTINGS_INITIAL_WINDOW_SIZE. */
  window = 65_535;
  /** Answered calls ended so far (written, or reset), and that count when the check was armed: progress. */
  done = 0;
  /** SETTINGS_MAX_CONCURRENT_STREAMS 0 was sent: node's HTTP/2 layer refuses new streams before JS sees them. */
  closedToNew = false;
  doneBefore = 0;
  check: NodeJS.Timeout | undefined = undefined;
  constructor(readonly session: http2.ServerHttp2Session) {}
}

/** One gRPC call: its request body, its place in the body-timeout list, its deadline, its answer. */
class Call extends UnaryBody {
  /** Neighbours in the list of calls whose request has not ended (oldest first). */
  prev: Call | null = null;
  next: Call | null = null;
  waiting = false;
  requestEnded = false;
  /** The answer (or the cut) is sent; nothing more goes to the client. */
  answered = false;
  /** The limiter has the request: its outcome is what the observer hears. */
  deciding = false;
  deadline: NodeJS.Timeout | undefined = undefined;
  /** Watch: whether the service is known, the last status sent, the trailers to end with. */
  known = false;
  sent = -1;
  trailers: Record<string, string> = OK_TRAILERS;
  /** The call's trace, when tracing is on (TransportOptions.tracing). */
  traced: TracedCall | undefined = undefined;
  /** Answered, not yet written (the stream has not closed): its place in that list, and since when. */
  writing = false;
  wPrev: Call | null = null;
  wNext: Call | null = null;
  answeredAt = 0;
  /** What it adds to its connection's held bytes, and that connection; whether its stream's close is heard. */
  charge = 0;
  conn: Conn | undefined = undefined;
  listening = false;

  constructor(
    readonly t: H2Transport,
    readonly stream: Stream,
    readonly route: number,
    readonly since: number,
  ) {
    super();
  }
}

export const startH2Server: StartTransport = async (limiter, o) => {
  const t = new H2Transport(limiter, o);
  const port = await t.listen();
  return {
    port,
    setServing: (serving) => t.setServing(serving),
    shutdown: (graceMs) => t.shutdown(graceMs),
  } satisfies RunningTransport;
};

class H2Transport {
  readonly server: http2.Http2Server | http2.Http2SecureServer;
  private readonly logger: Logger;
  private readonly observer: CallObserver | undefined;
  private readonly tracing: CallTracing | undefined;
  private readonly maxMessageBytes: number;
  private readonly maxConcurrentStreams: number;
  private readonly bodyTimeoutMs: number;
  private readonly writeTimeoutMs: number;
  private readonly onCut: (scope: CutScope, reason: CutReason) => void;
  private readonly heldBudget: number;
  private heldBytes = 0;
  private serving = false;
  private stopping: Promise<boolean> | undefined;
  /** Calls the limiter has not returned: shutdown waits for them (their store calls would fail after it). */
  private readonly deciding = new Set<Call>();
  private onIdle: (() => void) | undefined;
  private readonly watchers = new Set<Call>();
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private readonly sockets = new Set<net.Socket>();
  private head: Call | null = null;
  private tail: Call | null = null;
  /** Answers not yet written, oldest first. */
  private wHead: Call | null = null;
  private wTail: Call | null = null;
  private readonly sweeper: NodeJS.Timeout;
  private readonly stopTlsReload: (() => void) | undefined;
  private readonly decideFailed = (err: unknown) => this.logger.error({ err }, "ShouldRateLimit failed after answering");
  /** Streaming services (TransportOptions.streams): their calls live in stream-calls.ts. */
  private readonly streamCalls: StreamCalls | undefined;

  constructor(
    private readonly limiter: Limiter,
    private readonly o: TransportOptions,
  ) {
    this.logger = o.logger;
    this.observer = o.observer;
    this.tracing = o.tracing;
    this.maxMessageBytes = o.maxMessageBytes;
    this.maxConcurrentStreams = o.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS;
    this.bodyTimeoutMs = o.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS;
    this.writeTimeoutMs = o.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS;
    this.onCut = o.onCut ?? noCut;
    this.heldBudget = Math.max(MIN_HELD_BUDGET, 4 * o.maxMessageBytes);
    const keepalive = o.keepalive ?? DEFAULT_KEEPALIVE;
    this.streamCalls = o.streams && o.streams.length > 0 ? new StreamCalls(o.streams, o.maxMessageBytes, o.logger) : undefined;

    const options: http2.SecureServerOptions = {
      settings: {
        maxConcurrentStreams: this.maxConcurrentStreams,
        maxHeaderListSize: MAX_HEADER_LIST_BYTES,
        enablePush: false,
      },
      // Memory node's HTTP/2 layer holds per connection (header tables, stream state, request DATA on its
      // way to JS, answers queued for a peer that does not read), in MB; past it, new streams are refused
      // with ENHANCE_YOUR_CALM. 1000 concurrent small calls fit easily; about 30 concurrent 1 MiB uploads
      // on one connection do not. (peerMaxConcurrentStreams bounds only streams this server would open,
      // and push is off, so node's default stands.)
      maxSessionMemory: 32,
    };
    const tls = o.tls;
    if (tls) {
      const secure = http2.createSecureServer({
        ...options,
        ...tls.secureContextOptions(),
        allowHTTP1: false,
        ALPNProtocols: ["h2"],
        handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS,
      });
      this.stopTlsReload = tls.onChange(() => {
        const next = tls.secureContextOptions();
        secure.setSecureContext({ cert: next.cert, key: next.key, ca: next.ca });
      });
      this.server = secure;
    } else {
      this.server = http2.createServer(options);
    }
    const server = this.server;
    if (o.maxConnections !== undefined) {
      // net.Server closes a connection past the cap as it is accepted, before TLS or HTTP/2 cost anything.
      server.maxConnections = o.maxConnections;
      server.on("drop", () => this.onCut("connection", "max_connections"));
    }
    server.on("stream", (stream: Stream, headers: http2.IncomingHttpHeaders) => this.onStream(stream, headers));
    server.on("session", (session: http2.ServerHttp2Session) => {
      this.sessions.add(session);
      const conn = new Conn(session);
      (session as Session)[CONN] = conn;
      session.once("close", () => {
        this.sessions.delete(session);
        clearTimeout(conn.check);
      });
      session.on("remoteSettings", (settings: http2.Settings) => {
        if (settings.initialWindowSize !== undefined) conn.window = settings.initialWindowSize;
      });
      keepSessionAlive(session, keepalive);
      if (o.maxConnectionAge) limitSessionAge(session, o.maxConnectionAge);
      if (this.stopping) session.close();
    });
    server.on("connection", (socket: net.Socket) => {
      this.sockets.add(socket);
      socket.once("close", () => this.sockets.delete(socket));
    });
    server.on("sessionError", (err: Error) => this.logger.debug({ err }, "HTTP/2 session error"));

    const tick = Math.max(5, Math.min(1000, Math.floor(Math.min(this.bodyTimeoutMs, this.writeTimeoutMs) / 10)));
    this.sweeper = setInterval(() => {
      this.cutSlowBodies();
      this.cutSlowWrites();
    }, tick);
    this.sweeper.unref();
  }

  listen(): Promise<number> {
    const server = this.server;
    return new Promise<number>((resolve, reject) => {
      const failed = (err: Error) => {
        this.close();
        reject(err);
      };
      server.once("error", failed);
      server.listen({ host: this.o.host, port: this.o.port, reusePort: this.o.reusePort === true }, () => {
        server.off("error", failed);
        // Later errors (e.g. accept failing with EMFILE) are logged; the server keeps listening.
        server.on("error", (err) => this.logger.error({ err }, "gRPC server error"));
        resolve((server.address() as net.AddressInfo).port);
      });
    });
  }

  setServing(serving: boolean): void {
    if (this.stopping || serving === this.serving) return;
    this.serving = serving;
    const status = serving ? HEALTH.SERVING : HEALTH.NOT_SERVING;
    for (const w of this.watchers) if (w.known) this.sendStatus(w, status);
  }

  shutdown(graceMs: number): Promise<boolean> {
    this.stopping ??= this.drain(graceMs);
    return this.stopping;
  }

  // ---- streams ---------------------------------------------------------------------------------------

  private onStream(stream: Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on("error", onStreamError);
    const conn = (stream.session as Session | undefined)?.[CONN];
    if (conn !== undefined && conn.held >= MAX_HELD_BYTES_PER_CONNECTION) {
      // Its window holds back as many answers as it may: no work and no memory for another until it takes them.
      this.onCut("stream", "held_bytes");
      stream.close(NGHTTP2_REFUSED_STREAM);
      return;
    }
    if (this.streamCalls?.handles(headers[":path"])) return this.streamCalls.start(stream, headers);
    try {
      const path = headers[":path"];
      const route = path === RLS_PATH ? RLS : path === CHECK_PATH ? CHECK : path === WATCH_PATH ? WATCH : -1;
      // Every stream gets a Call, also those refused from their headers: what the client still sends
      // is read and dropped, and the body timeout bounds how long.
      const call = new Call(this, stream, route, performance.now());
      stream[CALL] = call;
      // Whatever its answer, it will wait for a WINDOW_UPDATE: counted from now, so one burst cannot pass the bound.
      if (conn !== undefined && conn.window < MIN_ANSWER_BYTES) this.charge(call, conn, HELD_STREAM_BYTES);
      stream.on("data", onData);
      stream.on("end", onEnd);
      this.waitForBody(call);

      if (headers[":method"] !== "POST") return this.answerHttp(call, 405);
      const contentType = headers["content-type"];
      if (contentType !== "application/grpc" && !isGrpcProto(contentType)) return this.answerHttp(call, 415);
      if (route < 0) return this.answerError(call, Status.UNIMPLEMENTED, refusal.unknownMethod(path ?? ""));
      const encoding = headers["grpc-encoding"];
      if (encoding !== undefined && encoding !== "identity") {
        return this.fail(call, { code: Status.UNIMPLEMENTED, message: refusal.unsupportedEncoding(String(encoding)) });
      }
      const timeout = headers["grpc-timeout"];
      if (timeout !== undefined) {
        const timeoutMs = parseTimeout(String(timeout));
        if (Number.isNaN(timeoutMs)) return this.fail(call, { code: Status.INTERNAL, message: `invalid grpc-timeout ${timeout}` });
        // Already passed: answered now, not raced against a fast decision by a 0 ms timer.
        if (timeoutMs <= 0) return this.fail(call, { code: Status.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
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
    this.heldBytes += grown;
    if (fault) return this.fail(call, fault);
    if (grown > 0) {
      if (before === 0) call.stream.once("close", onPartialClose); // a reset stream gives its bytes back
      if (this.heldBytes > this.heldBudget) {
        this.fail(call, {
          code: Status.RESOURCE_EXHAUSTED,
          message: `server is holding ${this.heldBytes} bytes of partly received requests, more than ${this.heldBudget}; retry later`,
        });
      }
    }
  }

  /** The request ended (END_STREAM): exactly one message must have come. */
  ended(call: Call): void {
    call.requestEnded = true;
    this.stopWaiting(call);
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
      if (!known) return this.answerError(call, Status.NOT_FOUND, refusal.unknownHealthService(service));
      return this.answer(call, HEALTH_FRAMES[this.serving ? HEALTH.SERVING : HEALTH.NOT_SERVING]);
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
      req = decodeRateLimitRequest(message, this.o.bounds);
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
    if (err instanceof InvalidRequestError) return { code: Status.INVALID_ARGUMENT, message: err.message };
    if (err instanceof StoreUnavailableError) {
      return { code: Status.UNAVAILABLE, message: `rate-limit store unavailable: ${err.message}` };
    }
    this.logger.error({ err }, "ShouldRateLimit failed");
    return { code: Status.INTERNAL, message: "internal error" };
  }

  /** A call ended by the transport before the limiter had it: answered, and the observer hears it. */
  fail(call: Call, fault: Fault): void {
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
    this.awaitWrite(call, frame.length);
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
    if (call.requestEnded) this.stopWaiting(call);
    this.release(call);
  }

  release(call: Call): void {
    this.heldBytes -= call.held;
    call.release();
  }

  deadlinePassed(call: Call): void {
    call.deadline = undefined;
    if (call.route === WATCH && call.sent >= 0) {
      // The Watch stream is open: end it with the status in its trailers.
      this.watchers.delete(call);
      call.trailers = { "grpc-status": String(Status.DEADLINE_EXCEEDED), "grpc-message": refusal.deadlineExceeded };
      if (!call.stream.destroyed && !call.stream.closed) call.stream.end();
      return;
    }
    // The limiter's work cannot be cancelled; its outcome still reaches the observer.
    this.fail(call, { code: Status.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
  }

  broken(stream: Stream, err: unknown): void {
    this.logger.error({ err }, "gRPC stream failed");
    if (!stream.destroyed) stream.destroy();
  }

  // ---- health Watch ----------------------------------------------------------------------------------

  private watch(call: Call, known: boolean): void {
    const s = call.stream;
    call.answered = true; // the unary part is done; what follows is the stream of statuses
    this.stopWaiting(call);
    if (s.destroyed || s.closed) return;
    call.known = known;
    s.respond(RESPONSE_HEADERS, WITH_TRAILERS);
    s.on("wantTrailers", sendTrailers);
    s.once("close", onWatchClose);
    this.watchers.add(call);
    this.sendStatus(call, known ? (this.serving ? HEALTH.SERVING : HEALTH.NOT_SERVING) : HEALTH.SERVICE_UNKNOWN);
  }

  private sendStatus(call: Call, status: number): void {
    if (call.sent === status) return;
    call.sent = status;
    const s = call.stream;
    if (!s.destroyed && !s.closed && s.writable) s.write(HEALTH_FRAMES[status]);
  }

  unwatch(call: Call): void {
    this.watchers.delete(call);
    if (call.deadline) clearTimeout(call.deadline);
    call.deadline = undefined;
  }

  // ---- request bodies that do not end --------------------------------------------------------------

  private waitForBody(call: Call): void {
    call.waiting = true;
    call.prev = this.tail;
    if (this.tail) this.tail.next = call;
    else this.head = call;
    this.tail = call;
  }

  private stopWaiting(call: Call): void {
    if (!call.waiting) return;
    call.waiting = false;
    if (call.prev) call.prev.next = call.next;
    else this.head = call.next;
    if (call.next) call.next.prev = call.prev;
    else this.tail = call.prev;
    call.prev = call.next = null;
  }

  /** Calls whose request has not ended bodyTimeoutMs after its headers: RST_STREAM CANCEL. */
  private cutSlowBodies(): void {
    const oldest = performance.now() - this.bodyTimeoutMs;
    while (this.head && this.head.since <= oldest) {
      const call = this.head;
      const s = call.stream;
      const told = call.answered; // answered early (the observer heard then), the rest of the body never came
      this.stopWaiting(call);
      this.finishCall(call);
      if (s.destroyed || s.closed) continue; // reset by the client: nothing to answer, nobody to tell
      if (call.route === RLS && !told) this.failedBeforeDeciding(call, STATUS_NAMES[Status.CANCELLED]);
      s.close(NGHTTP2_CANCEL);
    }
  }

  // ---- answers the client does not take ----------------------------------------------------------------

  /** The answer is queued; its stream closes once the client took it (and the trailers after it). */
  private awaitWrite(call: Call, bytes: number): void {
    const s = call.stream;
    if (s.closed) return;
    call.writing = true;
    call.answeredAt = performance.now();
    call.wPrev = this.wTail;
    if (this.wTail) this.wTail.wNext = call;
    else this.wHead = call;
    this.wTail = call;
    this.hearClose(call);
    const conn = (s.session as Session | undefined)?.[CONN];
    if (conn !== undefined && bytes > conn.window) this.charge(call, conn, call.charge > 0 ? bytes : bytes + HELD_STREAM_BYTES);
  }

  private hearClose(call: Call): void {
    if (call.listening) return;
    call.listening = true;
    call.stream.on("close", onCallClose);
  }

  /** The call waits for the client's window: its connection holds `bytes` more. */
  private charge(call: Call, conn: Conn, bytes: number): void {
    this.hearClose(call);
    call.conn = conn;
    call.charge += bytes;
    conn.held += bytes;
    if (conn.held < MAX_HELD_BYTES_PER_CONNECTION) return;
    if (conn.check === undefined) this.armCheck(conn);
    // The rest of a burst is refused by nghttp2 (it applies a lower limit as soon as it is sent), at the
    // cost of no JS stream each; onStream refuses any that still come.
    if (!conn.closedToNew) this.limitStreams(conn, 0);
  }

  /** Tells the client how many streams it may have open (node refuses more at once, before their JS streams). */
  private limitStreams(conn: Conn, n: number): void {
    if (conn.session.destroyed) return;
    try {
      conn.session.settings({ maxConcurrentStreams: n });
      conn.closedToNew = n === 0;
    } catch {
      // ERR_HTTP2_MAX_PENDING_SETTINGS_ACK: onStream refuses new streams all the same.
    }
  }

  /** Leaves the list of answers not yet written. */
  private unlinkWrite(call: Call): void {
    if (!call.writing) return;
    call.writing = false;
    if (call.wPrev) call.wPrev.wNext = call.wNext;
    else this.wHead = call.wNext;
    if (call.wNext) call.wNext.wPrev = call.wPrev;
    else this.wTail = call.wPrev;
    call.wPrev = call.wNext = null;
  }

  /** Its stream closed: written, or reset by either side. */
  closed(call: Call): void {
    const conn = call.conn;
    if (conn !== undefined) {
      if (call.answeredAt > 0) conn.done++;
      conn.held -= call.charge;
      call.charge = 0;
      call.conn = undefined;
      if (conn.closedToNew && conn.held < MAX_HELD_BYTES_PER_CONNECTION / 2) this.limitStreams(conn, this.maxConcurrentStreams);
    }
    this.unlinkWrite(call);
  }

  private armCheck(conn: Conn): void {
    conn.doneBefore = conn.done;
    conn.check = setTimeout(checkHeld, HELD_GRACE_MS, this, conn);
    conn.check.unref();
  }

  /** Still over the bound HELD_GRACE_MS later, and no answer taken meanwhile: GOAWAY ENHANCE_YOUR_CALM, and the connection is closed. */
  checkHeld(conn: Conn): void {
    conn.check = undefined;
    const session = conn.session;
    if (conn.held < MAX_HELD_BYTES_PER_CONNECTION || session.destroyed) return;
    if (conn.done !== conn.doneBefore) return this.armCheck(conn); // it takes answers, late: the write timeout bounds it
    this.logger.debug({ held: conn.held, window: conn.window }, "closing a connection whose window holds back its answers");
    this.onCut("connection", "held_bytes");
    session.destroy(new Error("the client's flow-control window holds back its answers"), NGHTTP2_ENHANCE_YOUR_CALM);
  }

  /** Answers not written writeTimeoutMs after they were ready: RST_STREAM CANCEL (the client gave up on them long ago). */
  private cutSlowWrites(): void {
    const oldest = performance.now() - this.writeTimeoutMs;
    while (this.wHead && this.wHead.answeredAt <= oldest) {
      const call = this.wHead;
      this.unlinkWrite(call);
      const s = call.stream;
      if (s.destroyed || s.closed) continue;
      this.onCut("stream", "write_timeout");
      s.close(NGHTTP2_CANCEL);
    }
  }

  // ---- shutdown --------------------------------------------------------------------------------------

  private async drain(graceMs: number): Promise<boolean> {
    this.serving = false;
    this.stopTlsReload?.();
    // Health watchers hear NOT_SERVING, then their streams end so they do not hold the shutdown.
    for (const w of this.watchers) {
      if (w.known) this.sendStatus(w, HEALTH.NOT_SERVING);
      if (!w.stream.destroyed && !w.stream.closed) w.stream.end();
    }
    this.watchers.clear();
    // Stop accepting; GOAWAY to every session: in-flight streams finish, new ones go elsewhere.
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sessions) s.close();
    this.streamCalls?.shutdown();
    const idle = new Promise<void>((resolve) => {
      this.onIdle = resolve;
      this.maybeIdle();
    });
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), graceMs);
    });
    const finished = await Promise.race([Promise.all([closed, idle]).then(() => true as const), expired]);
    clearTimeout(timer);
    if (!finished) this.cutAll();
    this.close();
    return finished;
  }

  private maybeIdle(): void {
    if (this.onIdle && this.deciding.size === 0) this.onIdle();
  }

  /** Grace is over: every call still open is reset with CANCEL (no status: the client knows it was cut). */
  private cutAll(): void {
    const open: Call[] = [...this.deciding];
    for (let c = this.head; c; c = c.next) open.push(c);
    for (const call of open) {
      this.stopWaiting(call);
      this.finishCall(call);
      if (!call.stream.destroyed && !call.stream.closed) call.stream.close(NGHTTP2_CANCEL);
    }
  }

  /** Everything still open goes: sessions closing on their own get a moment to send their last frames. */
  private close(): void {
    clearInterval(this.sweeper);
    this.stopTlsReload?.();
    if (this.server.listening) this.server.close();
    if (this.sessions.size === 0 && this.sockets.size === 0) return;
    setTimeout(() => {
      for (const s of this.sessions) s.destroy();
      for (const s of this.sockets) s.destroy();
    }, FINAL_FRAMES_MS).unref();
  }
}

// ---- shared listeners: `this` is the stream, its Call hangs on it --------------------------------------

function onData(this: Stream, chunk: Buffer): void {
  const call = this[CALL]!;
  try {
    call.t.take(call, chunk);
  } catch (err) {
    call.t.answerError(call, Status.INTERNAL, "internal error");
    call.t.broken(this, err);
  }
}

function onEnd(this: Stream): void {
  const call = this[CALL]!;
  try {
    call.t.ended(call);
  } catch (err) {
    call.t.broken(this, err);
  }
}

function onPartialClose(this: Stream): void {
  const call = this[CALL];
  if (call) call.t.release(call);
}

function onCallClose(this: Stream): void {
  const call = this[CALL];
  if (call) call.t.closed(call);
}

function checkHeld(t: H2Transport, conn: Conn): void {
  t.checkHeld(conn);
}

function noCut(): void {}

function onWatchClose(this: Stream): void {
  const call = this[CALL];
  if (call) call.t.unwatch(call);
}

function onDeadline(call: Call): void {
  try {
    call.t.deadlinePassed(call);
  } catch (err) {
    call.t.broken(call.stream, err);
  }
}

function sendTrailers(this: Stream): void {
  if (this.destroyed || this.closed) return;
  this.sendTrailers(this[CALL]?.trailers ?? OK_TRAILERS);
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

/** A peer's RST_STREAM with an error code, or a write after the peer went: the stream's 'close' follows. */
function onStreamError(): void {}

/** application/grpc or application/grpc+proto, parameters allowed; anything else is not for this server. */
function isGrpcProto(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const semi = contentType.indexOf(";");
  const media = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return media === "application/grpc" || media === "application/grpc+proto";
}
