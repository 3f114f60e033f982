// The store contract: where counters live. One meaning per algorithm: lua/*.lua and memory.ts agree.

/** One limit of one request, ready for the store. */
export interface Check {
  /** Full store key (already escaped; see limiter/keys.ts). */
  key: string;
  algorithm: "fixed_window" | "token_bucket";
  /** fixed_window: requests per window. token_bucket: capacity (burst). */
  capacity: number;
  /** fixed_window: window length in seconds. token_bucket: seconds to refill `rate` tokens... see refillPerSecond. */
  windowSeconds: number;
  /** token_bucket: tokens added per second (requests_per_unit / unit seconds). Unused by fixed_window. */
  refillPerSecond: number;
  /** Cost of this request; 0 = check without consuming. */
  hits: number;
  /** Evaluated, never refuses; where it would refuse it consumes nothing. */
  shadow: boolean;
}

export interface CheckResult {
  /** This limit alone would let the request through (shadow limits report their own verdict here). */
  allowed: boolean;
  /** What is left after this request (or unchanged when the request was refused), floored, >= 0. */
  remaining: number;
  /** Whole seconds until the limit is fully reset, rounded up. */
  resetSeconds: number;
  /** When not allowed: whole seconds (>= 1) until the same request would pass; -1 when it never can. */
  retryAfterSeconds: number;
}

/**
 * Evaluates all checks of one request atomically: if any non-shadow check refuses, nothing is
 * consumed from any of them. Results come back in the order of the checks.
 */
/** Health of one store node, for /readyz, metrics and logs. */
export interface NodeStatus {
  /** host:port (never a URL: it may carry a password), or "memory". */
  id: string;
  state: "up" | "down" | "circuit_open";
}

export interface StoreStatus {
  kind: string;
  nodes: NodeStatus[];
}

export interface Store {
  readonly name: string;
  /** Cheap: no I/O, the last known state of every node. */
  status(): StoreStatus;
  apply(checks: Check[]): Promise<CheckResult[]>;
  /** Connect / load scripts; resolves once the first attempt finished (success or logged failure). */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Raised by a store that could not answer (down, timeout). The limiter maps it to UNAVAILABLE. */
export class StoreUnavailableError extends Error {
  constructor(message: string, override readonly cause?: unknown) {
    super(message);
    this.name = "StoreUnavailableError";
  }
}
