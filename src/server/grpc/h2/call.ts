// One gRPC call of the h2 transport, and the listeners its stream shares with every other stream (no
// closure per call): `this` is the stream, and the Call hangs on it under CALL.
import type http2 from "node:http2";
import type { TracedCall } from "../grpc-contract.js";
import { UnaryBody } from "./framing.js";
import type { Conn, SlowCall } from "./slow-peers.js";
import { GRPC_STATUS } from "./refusals.js";

/** The routes of a unary stream (-1: a path this server does not serve). */
export const RLS = 0;
export const CHECK = 1;
export const WATCH = 2;

export const OK_TRAILERS = { "grpc-status": "0" };

/** What a call's listeners hand it to (unary-call.ts). */
export interface CallHandler {
  take(call: Call, chunk: Buffer): void;
  ended(call: Call): void;
  release(call: Call): void;
  closed(call: Call): void;
  unwatch(call: Call): void;
  deadlinePassed(call: Call): void;
  answerError(call: Call, code: number, message: string): void;
  broken(stream: http2.ServerHttp2Stream, err: unknown): void;
}

export const CALL = Symbol("sluice.call");
export type Stream = http2.ServerHttp2Stream & { [CALL]?: Call };

/** One gRPC call: its request body, its places in the slow-peer lists, its deadline, its answer. */
export class Call extends UnaryBody implements SlowCall {
  /** Its places in slow-peers.ts's lists, carried here (no object per list): requests not ended (slot 0), answers not written (slot 1). */
  prev0: SlowCall | null = null;
  next0: SlowCall | null = null;
  in0 = false;
  prev1: SlowCall | null = null;
  next1: SlowCall | null = null;
  in1 = false;
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
  /** Answered, not yet written: since when. */
  answeredAt = 0;
  /** What it adds to its connection's held bytes, and that connection; whether its stream's close is heard. */
  charge = 0;
  conn: Conn | undefined = undefined;
  listening = false;

  constructor(
    readonly t: CallHandler,
    readonly stream: Stream,
    readonly route: number,
    readonly since: number,
  ) {
    super();
  }
}

// ---- shared listeners: `this` is the stream, its Call hangs on it --------------------------------------

export function onData(this: Stream, chunk: Buffer): void {
  const call = this[CALL]!;
  try {
    call.t.take(call, chunk);
  } catch (err) {
    call.t.answerError(call, GRPC_STATUS.INTERNAL, "internal error");
    call.t.broken(this, err);
  }
}

export function onEnd(this: Stream): void {
  const call = this[CALL]!;
  try {
    call.t.ended(call);
  } catch (err) {
    call.t.broken(this, err);
  }
}

export function onPartialClose(this: Stream): void {
  const call = this[CALL];
  if (call) call.t.release(call);
}

/** For slow-peers.ts: an answered call's stream closed (written, or reset). */
export function onCallClose(this: Stream): void {
  const call = this[CALL];
  if (call) call.t.closed(call);
}

export function onWatchClose(this: Stream): void {
  const call = this[CALL];
  if (call) call.t.unwatch(call);
}

export function onDeadline(call: Call): void {
  try {
    call.t.deadlinePassed(call);
  } catch (err) {
    call.t.broken(call.stream, err);
  }
}

export function sendTrailers(this: Stream): void {
  if (this.destroyed || this.closed) return;
  this.sendTrailers(this[CALL]?.trailers ?? OK_TRAILERS);
}
