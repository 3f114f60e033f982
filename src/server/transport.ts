// What every gRPC transport of sluice offers main.ts and the conformance suite (test/conformance/):
// serve RateLimitService.ShouldRateLimit and grpc.health.v1 on one port, bound what a client can make
// it hold, and stop gracefully. A transport decodes, bounds and encodes; the decision is the limiter's.
import type { Logger } from "pino";
import type { Limiter } from "../limiter/limiter.js";
import type { Decision, RateLimitRequest } from "../limiter/types.js";
import type { RequestBounds } from "./decode.js";
import type { ServerTls } from "./tls.js";

export const RLS_SERVICE = "envoy.service.ratelimit.v3.RateLimitService";

export interface TransportOptions {
  host: string;
  port: number;
  bounds: RequestBounds;
  /** Largest request message; a larger one is refused from its length prefix, before it is buffered. */
  maxMessageBytes: number;
  /** Calls in flight per connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams?: number;
  logger: Logger;
  /** TLS / mTLS with reload (server/tls.ts); absent = plaintext. */
  tls?: ServerTls;
  /** A stream that has not sent its whole request this long after its headers is cut (RST_STREAM CANCEL). */
  bodyTimeoutMs?: number;
  /** Ping a connection idle this long; close it when the ping is not acknowledged within timeoutMs. */
  keepalive?: { intervalMs: number; timeoutMs: number };
  /** GOAWAY to a connection this old (up to 10 % sooner, jitter), closed graceMs later; absent = no limit. */
  maxConnectionAge?: { ageMs: number; graceMs: number };
  /** Bind with SO_REUSEPORT so several processes (--workers) each accept on the same port. */
  reusePort?: boolean;
  /** Told of every ShouldRateLimit call once answered (metrics); must be cheap. */
  observer?: CallObserver;
}

export const DEFAULT_BODY_TIMEOUT_MS = 10_000;
export const DEFAULT_KEEPALIVE = { intervalMs: 60_000, timeoutMs: 20_000 } as const;

export interface CallObserver {
  decided(req: RateLimitRequest, decision: Decision, seconds: number): void;
  /** The call got a gRPC error; code in snake_case, e.g. "invalid_argument". */
  failed(code: string, seconds: number): void;
}

export interface RunningTransport {
  port: number;
  setServing(serving: boolean): void;
  /** Stop accepting, let in-flight calls finish within graceMs, then force. True when all finished in time. */
  shutdown(graceMs: number): Promise<boolean>;
}

export type StartTransport = (limiter: Limiter, o: TransportOptions) => Promise<RunningTransport>;
