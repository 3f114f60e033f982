// What the gRPC server offers a streaming service (client, server or bidirectional streaming on one path):
// the transport frames, bounds and flow-controls messages; the service reads and answers them. RLQS
// (src/rlqs/) is the one user; cli/serve.ts hands it to the transport in TransportOptions.streams.

/** One open streaming call as the service sees it. */
export interface StreamCall {
  /** Sends one message (the encoded message, without the 5-byte prefix). False when the call is over. */
  send(message: Buffer): boolean;
  /** Ends the call with a gRPC status (trailers); nothing more is read or sent. */
  end(code: number, message?: string): void;
  /** The client's address, for logs. */
  readonly peer: string;
}

/** Why a call ended, as its handler hears it once. */
export type StreamEnd = "client_end" | "reset" | "ended" | "shutdown";

export interface StreamHandler {
  /**
   * One message from the client. While a returned promise is pending the transport reads no more from
   * this call (the client's flow-control window fills: backpressure).
   */
  message(bytes: Buffer): void | Promise<void>;
  /** The call is over (the client half-closed, reset it, the service ended it, or the server stops). */
  closed(why: StreamEnd): void;
}

export interface StreamService {
  /** The HTTP/2 :path, e.g. /envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas. */
  readonly path: string;
  /** Calls open at once on this server; past it a new call is refused with RESOURCE_EXHAUSTED. */
  readonly maxCalls: number;
  /** A new call: its handler, or a refusal (code and message) sent as a trailers-only answer. */
  open(call: StreamCall): StreamHandler | { code: number; message: string };
}
