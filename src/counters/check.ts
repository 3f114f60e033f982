// What the store contract carries per limit of a request: the parts every algorithm shares, and the
// answer. Each algorithm's own check type (its parameters) lives in its folder; registry.ts unites them.

/** The parts of one store check every algorithm has. */
export interface CheckBase {
  /** Full store key (already escaped; see core/keys.ts). */
  key: string;
  /** Requests the limit holds at once: a window's count, a bucket's burst, a quota's total. */
  capacity: number;
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
  /** When not allowed: milliseconds (>= 1) until the same request would pass; -1 when it never can. */
  retryAfterMs: number;
  /** Windows and quotas: end of the window or period decided in, ms since the epoch by the store's clock; else 0. */
  periodEndMs: number;
}

/** One check's decision against a level, before the driver commits it; `after` is the level it leaves. */
export interface Verdict<Level> extends CheckResult {
  after: Level;
}

/** A stored value with its absolute expiry (Redis: the value and its PEXPIRETIME). */
export interface Stored {
  value: unknown;
  expiresAtMs: number;
}

/** A check placed at the store's time: the key it uses now and, for a calendar quota, that period's end. */
export interface Bound {
  key: string;
  periodEndMs: number;
}
