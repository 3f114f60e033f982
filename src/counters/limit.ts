// A limit as the algorithms read it: what rules/ compiles a rate_limit or quota into (rules/model.ts
// narrows its algorithm to a registry name).
export type Unit = "second" | "minute" | "hour" | "day" | "week" | "month" | "year";
/** What sluice answers for a limit while its store node fails (sluice extension). */
/** error: the call fails with gRPC UNAVAILABLE, so Envoy's failure_mode_deny decides (the reference's way). */
export type FailureMode = "allow" | "deny" | "local" | "error";
/** Calendar periods of a quota, in UTC (sluice extension). */
export type QuotaPeriod = "day" | "month";

/** Seconds per unit, aligned to the epoch as envoyproxy/ratelimit does (week 7 d, month 30 d, year 365 d). */
export const UNIT_SECONDS: Record<Unit, number> = {
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86400,
  week: 7 * 86400,
  month: 30 * 86400,
  year: 365 * 86400,
};

/** Where a rule came from, for operators' error messages and `explain`. */
export interface Source {
  file: string;
  line: number;
}

export interface Limit<Name extends string = string> {
  /** Stable id of the rule, e.g. "edge.api_key.plan_pro": domain + descriptor path (reference stats key). */
  path: string;
  /** Which limit of the descriptor: "rate_limit", "rate_limits[1]" or "quota". */
  label: string;
  source: Source;
  /** Quota: its period as a unit (day or month, calendar-aligned in UTC). */
  unit: Unit;
  /** Quota: the total per period. */
  requestsPerUnit: number;
  /** Requests the limit holds at once: a token bucket's `burst` when set, else requestsPerUnit (a quota's total). */
  capacity: number;
  /** How it counts (src/counters/registry.ts). */
  algorithm: Name;
  /** Set for algorithm "quota". */
  period?: QuotaPeriod;
  /** Last part of the store key, unique among the limits of one descriptor (the algorithm's rule spec). */
  keyTag: string;
  failureMode: FailureMode;
  unlimited: boolean;
  name: string;
  /** Names of limits this one replaces (reference `replaces`). */
  replaces: string[];
  shadowMode: boolean;
  detailedMetric: boolean;
  valueToMetric: boolean;
  /**
   * Reference quota_mode: this descriptor's refusal refuses the request only when every quota-mode
   * descriptor of the request refuses (ordinary descriptors still refuse alone).
   */
  quotaMode: boolean;
  /**
   * sluice extension `approximate: {sync_interval_ms}`: decided from leases this instance took from the
   * store's counter (src/approximate/); absent = exact, one store call per request.
   */
  approximate?: ApproximateMode;
}

/** How an approximate limit leases from the store's counter. */
export interface ApproximateMode {
  /** How long a lease lives at most, unused units then given back (10 to 10,000 ms). */
  syncIntervalMs: number;
}

/** A parsed limit before the descriptor-wide settings (shadow_mode, failure_mode, ...) are added. */
export type BaseLimit<Name extends string = string> = Omit<
  Limit<Name>,
  "shadowMode" | "detailedMetric" | "valueToMetric" | "quotaMode" | "failureMode" | "keyTag"
>;
