// The defences against clients that send or read too slowly: request bodies that do not end (body
// timeout), answers the client does not take (write timeout), request bytes held across connections
// (a budget), and answers a connection's flow-control window holds back (a bound per connection: its
// new streams are refused, then it goes).
import http2 from "node:http2";
import type { CutReason, CutScope } from "../grpc-contract.js";
import { CallList, type Linked } from "./call-list.js";

const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_REFUSED_STREAM } = http2.constants;

/** Partly received request bytes held across all connections; beyond, a call is refused (RESOURCE_EXHAUSTED). */
const MIN_HELD_BUDGET = 64 << 20;
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

const CONN = Symbol("sluice.conn");
type Session = http2.ServerHttp2Session & { [CONN]?: Conn };

/**
 * One client connection: what its flow-control window holds back (answers larger than its initial stream
 * window, and calls that cannot be answered through a window smaller than any answer), in bytes as
 * HELD_STREAM_BYTES counts; and the check once that is over the bound.
 */
export class Conn {
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

/** What a call carries for these defences; Linked: its places in the list of requests not ended (slot 0) and in that of answers not written (slot 1). */
export interface SlowCall extends Linked<SlowCall> {
  readonly stream: http2.ServerHttp2Stream;
  readonly since: number;
  /** When its answer was queued (0: not yet). */
  answeredAt: number;
  /** What it adds to its connection's held bytes, and that connection; whether its stream's close is heard. */
  charge: number;
  conn: Conn | undefined;
  listening: boolean;
}

export interface SlowPeersOptions {
  bodyTimeoutMs: number;
  writeTimeoutMs: number;
  maxMessageBytes: number;
  maxConcurrentStreams: number;
  onCut: (scope: CutScope, reason: CutReason) => void;
  /** A request not ended bodyTimeoutMs after its headers, taken off the list: the caller ends the call. */
  onSlowBody: (call: SlowCall) => void;
  /** Listener for a call's stream 'close' (`this` is the stream); it calls closed(). */
  onStreamClose: (this: http2.ServerHttp2Stream) => void;
  debug: (fields: object, message: string) => void;
}

export class SlowPeers {
  /** Calls whose request has not ended, and answers not yet written; oldest first. */
  readonly bodies = new CallList<SlowCall>(0);
  private readonly writes = new CallList<SlowCall>(1);
  /** Partly received request bytes held, across connections, and the most that may be. */
  heldBytes = 0;
  readonly heldBudget: number;
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly o: SlowPeersOptions) {
    this.heldBudget = Math.max(MIN_HELD_BUDGET, 4 * o.maxMessageBytes);
    const tick = Math.max(5, Math.min(1000, Math.floor(Math.min(o.bodyTimeoutMs, o.writeTimeoutMs) / 10)));
    this.sweeper = setInterval(() => {
      this.cutSlowBodies();
      this.cutSlowWrites();
    }, tick);
    this.sweeper.unref();
  }

  stop(): void {
    clearInterval(this.sweeper);
  }

  /** A new connection: its window is followed from its SETTINGS. */
  attach(session: http2.ServerHttp2Session): void {
    const conn = new Conn(session);
    (session as Session)[CONN] = conn;
    session.once("close", () => clearTimeout(conn.check));
    session.on("remoteSettings", (settings: http2.Settings) => {
      if (settings.initialWindowSize !== undefined) conn.window = settings.initialWindowSize;
    });
  }

  /** A new stream on a connection (connOf) whose window holds back as many answers as it may: refused before any work. */
  refused(stream: http2.ServerHttp2Stream, conn: Conn | undefined): boolean {
    if (conn === undefined || conn.held < MAX_HELD_BYTES_PER_CONNECTION) return false;
    this.o.onCut("stream", "held_bytes");
    stream.close(NGHTTP2_REFUSED_STREAM);
    return true;
  }

  /**
   * A new call on `conn` (connOf its stream, looked up once per stream): it waits for its body; through a
   * window smaller than any answer, it is held from now, so one burst cannot pass the bound.
   */
  started(call: SlowCall, conn: Conn | undefined): void {
    if (conn !== undefined && conn.window < MIN_ANSWER_BYTES) this.charge(call, conn, HELD_STREAM_BYTES);
    this.bodies.push(call);
  }

  stopWaiting(call: SlowCall): void {
    this.bodies.remove(call);
  }

  /** Calls whose request has not ended bodyTimeoutMs after its headers. */
  private cutSlowBodies(): void {
    const oldest = performance.now() - this.o.bodyTimeoutMs;
    for (let call = this.bodies.shiftJoinedBy(oldest, sinceOf); call !== null; call = this.bodies.shiftJoinedBy(oldest, sinceOf)) {
      this.o.onSlowBody(call);
    }
  }

  /** The answer is queued; its stream closes once the client took it (and the trailers after it). */
  awaitWrite(call: SlowCall, bytes: number): void {
    const s = call.stream;
    if (s.closed) return;
    call.answeredAt = performance.now();
    this.writes.push(call);
    this.hearClose(call);
    const conn = connOf(s);
    if (conn !== undefined && bytes > conn.window) this.charge(call, conn, call.charge > 0 ? bytes : bytes + HELD_STREAM_BYTES);
  }

  private hearClose(call: SlowCall): void {
    if (call.listening) return;
    call.listening = true;
    call.stream.on("close", this.o.onStreamClose);
  }

  /** The call waits for the client's window: its connection holds `bytes` more. */
  private charge(call: SlowCall, conn: Conn, bytes: number): void {
    this.hearClose(call);
    call.conn = conn;
    call.charge += bytes;
    conn.held += bytes;
    if (conn.held < MAX_HELD_BYTES_PER_CONNECTION) return;
    if (conn.check === undefined) this.armCheck(conn);
    // The rest of a burst is refused by nghttp2 (it applies a lower limit as soon as it is sent), at the
    // cost of no JS stream each; refused() refuses any that still come.
    if (!conn.closedToNew) this.limitStreams(conn, 0);
  }

  /** Tells the client how many streams it may have open (node refuses more at once, before their JS streams). */
  private limitStreams(conn: Conn, n: number): void {
    if (conn.session.destroyed) return;
    try {
      conn.session.settings({ maxConcurrentStreams: n });
      conn.closedToNew = n === 0;
    } catch {
      // ERR_HTTP2_MAX_PENDING_SETTINGS_ACK: refused() refuses new streams all the same.
    }
  }

  /** Its stream closed: written, or reset by either side. */
  closed(call: SlowCall): void {
    const conn = call.conn;
    if (conn !== undefined) {
      if (call.answeredAt > 0) conn.done++;
      conn.held -= call.charge;
      call.charge = 0;
      call.conn = undefined;
      if (conn.closedToNew && conn.held < MAX_HELD_BYTES_PER_CONNECTION / 2) this.limitStreams(conn, this.o.maxConcurrentStreams);
    }
    this.writes.remove(call);
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
    this.o.debug({ held: conn.held, window: conn.window }, "closing a connection whose window holds back its answers");
    this.o.onCut("connection", "held_bytes");
    session.destroy(new Error("the client's flow-control window holds back its answers"), NGHTTP2_ENHANCE_YOUR_CALM);
  }

  /** Answers not written writeTimeoutMs after they were ready: RST_STREAM CANCEL (the client gave up on them long ago). */
  private cutSlowWrites(): void {
    const oldest = performance.now() - this.o.writeTimeoutMs;
    for (let call = this.writes.shiftJoinedBy(oldest, answeredAtOf); call !== null; call = this.writes.shiftJoinedBy(oldest, answeredAtOf)) {
      const s = call.stream;
      if (s.destroyed || s.closed) continue;
      this.o.onCut("stream", "write_timeout");
      s.close(NGHTTP2_CANCEL);
    }
  }
}

/** The connection a stream came on (undefined once its session is gone). */
export function connOf(stream: http2.ServerHttp2Stream): Conn | undefined {
  return (stream.session as Session | undefined)?.[CONN];
}

/** When a call joined each list: its headers came; its answer was queued. */
function sinceOf(call: SlowCall): number {
  return call.since;
}

function answeredAtOf(call: SlowCall): number {
  return call.answeredAt;
}

function checkHeld(peers: SlowPeers, conn: Conn): void {
  peers.checkHeld(conn);
}
