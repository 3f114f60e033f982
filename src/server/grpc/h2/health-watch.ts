// grpc.health.v1 Watch: the server's serving status, and the open Watch streams that hear each change of
// it (a HealthCheckResponse message per change; the stream ends with the server, or at its deadline).
import type http2 from "node:http2";
import { HEALTH, HEALTH_FRAMES } from "./health.js";
import { refusal } from "./refusals.js";
import { GRPC_STATUS } from "./refusals.js";

/** What a Watch call carries: its stream (answered with HEADERS already), and what it was last sent. */
export interface Watcher {
  readonly stream: http2.ServerHttp2Stream;
  /** Whether the service it names is known (an unknown one hears SERVICE_UNKNOWN, and nothing after). */
  known: boolean;
  /** The last status sent (-1: none). */
  sent: number;
  /** The trailers its stream ends with. */
  trailers: Record<string, string>;
}

export class HealthWatch {
  serving = false;
  private readonly watchers = new Set<Watcher>();

  /** The stream is open: it hears the status now, and each change. */
  add(call: Watcher, known: boolean): void {
    call.known = known;
    this.watchers.add(call);
    this.send(call, known ? (this.serving ? HEALTH.SERVING : HEALTH.NOT_SERVING) : HEALTH.SERVICE_UNKNOWN);
  }

  setServing(serving: boolean): void {
    if (serving === this.serving) return;
    this.serving = serving;
    const status = serving ? HEALTH.SERVING : HEALTH.NOT_SERVING;
    for (const w of this.watchers) if (w.known) this.send(w, status);
  }

  /** Its stream closed. */
  remove(call: Watcher): void {
    this.watchers.delete(call);
  }

  /** Its deadline passed: whether it was watching (its stream then ends with DEADLINE_EXCEEDED in its trailers). */
  expired(call: Watcher): boolean {
    if (call.sent < 0) return false;
    this.watchers.delete(call);
    call.trailers = { "grpc-status": String(GRPC_STATUS.DEADLINE_EXCEEDED), "grpc-message": refusal.deadlineExceeded };
    if (!call.stream.destroyed && !call.stream.closed) call.stream.end();
    return true;
  }

  /** Shutdown: watchers hear NOT_SERVING, then their streams end so they do not hold it up. */
  endAll(): void {
    this.serving = false;
    for (const w of this.watchers) {
      if (w.known) this.send(w, HEALTH.NOT_SERVING);
      if (!w.stream.destroyed && !w.stream.closed) w.stream.end();
    }
    this.watchers.clear();
  }

  private send(call: Watcher, status: number): void {
    if (call.sent === status) return;
    call.sent = status;
    const s = call.stream;
    if (!s.destroyed && !s.closed && s.writable) s.write(HEALTH_FRAMES[status]);
  }
}
