// What sluice's gRPC server (h2/) offers cli/serve.ts and the conformance suite (test/conformance/), which can
// also judge an out-of-tree candidate against it: serve RateLimitService.ShouldRateLimit and
// grpc.health.v1 on one port, bound what a client can make it hold, and stop gracefully. The server
// decodes, bounds and encodes; the decision is the limiter's.
import { SETTINGS } from "../../core/settings-table.js";
import type { Logger } from "pino";
import type { Limiter } from "../../limiter/limiter.js";
import type { Decision, RateLimitRequest } from "../../limiter/types.js";
import type { RequestBounds } from "./decode.js";
import type { ServerTls } from "./tls.js";
import type { StreamService } from "./stream-contract.js";
import { RLS_SERVICE } from "../../core/rls.js";
import type { CallTracing, CutReason, CutScope, HeaderGetter, TracedCall } from "../../telemetry/call-tracing.js";

export { RLS_SERVICE };
export type { CallTracing, CutReason, CutScope, HeaderGetter, TracedCall };

/** The name envoyproxy/ratelimit registers its gRPC health under: probes written for it ask this. */
const REFERENCE_HEALTH_SERVICE = "ratelimit";

/** grpc.health.v1 services answered: "" (the server as a whole), the rate-limit service, the reference's name. */
export const isHealthService = (service: string) => service === "" || service === RLS_SERVICE || service === REFERENCE_HEALTH_SERVICE;

/** Calls in flight per connection, unless configured (SLUICE_MAX_CONCURRENT_STREAMS). */
export const DEFAULT_MAX_CONCURRENT_STREAMS = SETTINGS.MAX_CONCURRENT_STREAMS.default;

export interface TransportOptions {
  host: string;
  port: number;
  bounds: RequestBounds;
  /** Largest request message; a larger one is refused from its length prefix, before it is buffered. */
  maxMessageBytes: number;
  /** Calls in flight per connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams?: number;
  logger: Logger;
  /** TLS / mTLS with reload (server/grpc/tls.ts); absent = plaintext. */
  tls?: ServerTls;
  /** A stream that has not sent its whole request this long after its headers is cut (RST_STREAM CANCEL). */
  bodyTimeoutMs?: number;
  /** Ping a connection idle this long; close it when the ping is not acknowledged within timeoutMs. */
  keepalive?: { intervalMs: number; timeoutMs: number };
  /** GOAWAY to a connection this old (up to 10 % sooner, jitter), closed graceMs later; absent = no limit. */
  maxConnectionAge?: { ageMs: number; graceMs: number };
  /** Open client connections; a new one past it is closed at once (and told to onCut). Absent = no cap. */
  maxConnections?: number;
  /** An answer not written to the client this long after it was ready is reset (RST_STREAM CANCEL). */
  writeTimeoutMs?: number;
  /** Told of every connection refused and every stream or connection reset to bound a client (metrics). */
  onCut?: (scope: CutScope, reason: CutReason) => void;
  /** Bind with SO_REUSEPORT so several processes (--workers) each accept on the same port. */
  reusePort?: boolean;
  /** Told of every ShouldRateLimit call once answered (metrics); must be cheap. */
  observer?: CallObserver;
  /** Tracing (telemetry/tracing.ts); absent = off, and a call costs one check of this field. */
  tracing?: CallTracing;
  /** Streaming services on the same port (RLQS); absent = none. */
  streams?: readonly StreamService[];
}

export const DEFAULT_BODY_TIMEOUT_MS = 10_000;
/**
 * An answer is a few dozen bytes: a client that reads writes it within a round trip, and Envoy gives up on a
 * rate-limit call after its own timeout (20 ms by default, seconds at most). Past this the answer is useless
 * and only holds memory.
 */
export const DEFAULT_WRITE_TIMEOUT_MS = 5_000;
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
