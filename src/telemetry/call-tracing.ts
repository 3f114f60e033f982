// What the transport tells telemetry about a call: its tracing hooks and why a connection or stream was cut.
import type { Decision, RateLimitRequest } from "../limiter/types.js";

/**
 * Why a transport cut a client off on its own, to bound what the client makes it hold (metrics:
 * sluice_grpc_connections_closed_total and sluice_grpc_streams_reset_total, by reason): a connection refused
 * past maxConnections; a stream whose answer was not written within the write timeout; a connection holding
 * more unwritten answers than its bound.
 */
export type CutReason = "max_connections" | "write_timeout" | "held_bytes";

/** What was cut: a whole connection, or one stream (one call). */
export type CutScope = "connection" | "stream";

/** Reads a request header (lower-case name) out of a transport's own header object, without copying it. */
export interface HeaderGetter<Carrier> {
  get(carrier: Carrier, name: string): string | string[] | undefined;
  keys(carrier: Carrier): string[];
}

/** Per-call tracing: begun with the call's request headers, told its outcome like the observer. */
export interface CallTracing {
  begin<Carrier>(carrier: Carrier, getter: HeaderGetter<Carrier>): TracedCall;
}

export interface TracedCall {
  /** Runs the decision as this call's, so what it does (store calls) is attributed to the call. */
  run<T>(decide: () => Promise<T>): Promise<T>;
  decided(req: RateLimitRequest, decision: Decision, seconds: number): void;
  /** code as CallObserver.failed's; req when the request was decoded. */
  failed(code: string, seconds: number, req?: RateLimitRequest): void;
}
