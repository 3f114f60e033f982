// The store contract: where counters live. One meaning per algorithm: lua/*.lua and memory.ts agree.

/** One limit of one request, ready for the store. */
export interface Check {
  /** Full store key (already escaped; see limiter/keys.ts). Quota: the key of the first of its two periods. */
  key: string;
  algorithm: "fixed_window" | "token_bucket" | "quota";
  /** fixed_window: requests per window. token_bucket: capacity (burst). quota: total per period. */
  capacity: number;
  /** fixed_window: window length in seconds (epoch-aligned). Unused by the others. */
  windowSeconds: number;
  /** token_bucket: tokens added per second (requests_per_unit / unit seconds). Unused by the others. */
  refillPerSecond: number;
  /** Cost of this request; 0 = check without consuming. */
  hits: number;
  /** Evaluated, never refuses; where it would refuse it consumes nothing. */
  shadow: boolean;
  /** Quota only: two adjacent calendar periods around the caller's clock; the store's clock picks one. */
  periods?: QuotaPeriods;
}

/** The algorithm's parameter of a check: window seconds, refill per second, or 0 (quota). */
export function checkParam(c: Check): number {
  return c.algorithm === "fixed_window" ? c.windowSeconds : c.algorithm === "token_bucket" ? c.refillPerSecond : 0;
}

export interface QuotaPeriods {
  /** Key of the second period (the first is Check.key). */
  nextKey: string;
  /** Start of the first period, start of the second (= end of the first), end of the second; ms since the epoch. */
  startMs: number;
  boundaryMs: number;
  endMs: number;
}

export interface CheckResult {
  /** This limit alone would let the request through (shadow limits report their own verdict here). */
  allowed: boolean;
  /** What is left after this request (or unchanged when the request was refused), floored, >= 0. */
  remaining: number;
  /** Whole seconds until the limit is fully reset, rounded up. */
  resetSeconds: number;
  /** When not allowed: milliseconds (>= 1) until the same request would pass; -1 when it never can. */
  retryAfterMs: number;
  /** fixed_window and quota: end of the window or period decided in, ms since the epoch by the store's clock; else 0. */
  periodEndMs: number;
}

/** Health of one store node, for /readyz, metrics and logs. */
export interface NodeStatus {
  /** host:port (never a URL: it may carry a password), "sentinel:NAME" (a Sentinel-monitored master), or "memory". */
  id: string;
  state: "up" | "down" | "circuit_open";
  /** Calls sent to the node and waiting for its reply (0 for the memory store). */
  inFlight: number;
  /** Sentinel only: host:port of the master the sentinels named at the last connect (it moves on failover). */
  master?: string;
}

export interface StoreStatus {
  kind: string;
  nodes: NodeStatus[];
}

/**
 * Counters, split into groups: the keys of one group live on one store node (one Cluster slot) and are
 * evaluated together atomically. Every key of one descriptor shares a hash tag, so it lands in one group.
 */
export interface Store {
  readonly name: string;
  /** Cheap: no I/O, the last known state of every node. */
  status(): StoreStatus;
  /**
   * The group holding keys with this hash tag (the text between the key's braces) of a limit whose unit
   * lasts unitSeconds (1: a per-second limit). Pure and cheap. A store may keep limits of some units apart
   * (split-by-unit.ts: the reference's per-second Redis); the others ignore unitSeconds.
   */
  groupOf(hashTag: string, unitSeconds?: number): number;
  /**
   * Evaluates checks of one group atomically: if any non-shadow check refuses, nothing is consumed from
   * any of them. Results come back in the order of the checks. dryRun: the request is refused
   * already (elsewhere); evaluate as if refused, consume nothing, report what is there.
   */
  apply(group: number, checks: Check[], dryRun?: boolean): Promise<CheckResult[]>;
  /** Gives back what an earlier apply of these checks consumed (another group refused the request). */
  refund(group: number, checks: Check[], results: CheckResult[]): Promise<void>;
  /** Connect / load scripts; resolves once the first attempt finished (success or logged failure). */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Raised by a store that could not answer (down, timeout, circuit open). The limiter applies the failure policy. */
export class StoreUnavailableError extends Error {
  constructor(message: string, override readonly cause?: unknown) {
    super(message);
    this.name = "StoreUnavailableError";
  }
}
