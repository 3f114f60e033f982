// The compiled rule model: what the loader produces and the limiter consumes.
import type { AlgorithmName } from "../counters/registry.js";

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

export interface Limit {
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
  algorithm: AlgorithmName;
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

/** One descriptor node of the rule tree. */
export interface RuleNode {
  key: string;
  /** Configured value; "" for a value-less key. May contain `*` wildcards. */
  value: string;
  /** True when value contains `*`. */
  wildcard: boolean;
  /** All values matching this wildcard share one counter (reference share_threshold). */
  shareThreshold: boolean;
  /** Compiled glob matcher (only when wildcard). Built at load time, never per request. */
  match?: (value: string) => boolean;
  /** Reference detailed_metric / value_to_metric, kept per node since they shape stats keys on nodes without limits too. */
  detailedMetric?: boolean;
  valueToMetric?: boolean;
  /** The limits of this descriptor (rate_limit, rate_limits, quota), all checked together; empty when none. */
  limits: Limit[];
  /** Reference `metadata`, returned in dynamic_metadata when matched. */
  metadata?: Record<string, unknown>;
  children: RuleLevel;
  source: Source;
}

/** The children of a node (or a domain's top level), indexed for matching without scans. */
export interface RuleLevel {
  /** key -> value -> node, for exact values. */
  exact: Map<string, Map<string, RuleNode>>;
  /** key -> wildcard nodes in file order. */
  wildcards: Map<string, RuleNode[]>;
  /** key -> the value-less node. */
  keyOnly: Map<string, RuleNode>;
}

/** The nodes of one level in file order (by file, then line). */
export function levelNodes(level: RuleLevel): RuleNode[] {
  const nodes: RuleNode[] = [];
  for (const m of level.exact.values()) for (const n of m.values()) nodes.push(n);
  for (const list of level.wildcards.values()) nodes.push(...list);
  for (const n of level.keyOnly.values()) nodes.push(n);
  return nodes.sort((a, b) => (a.source.file === b.source.file ? a.source.line - b.source.line : a.source.file < b.source.file ? -1 : 1));
}

export interface DomainRules {
  domain: string;
  files: string[];
  root: RuleLevel;
  /** Count of descriptors carrying a limit, for summaries. */
  ruleCount: number;
  /** The domain's failure_mode (default for its descriptors). */
  failureMode: FailureMode;
}

export interface RuleSet {
  domains: Map<string, DomainRules>;
  /** A digest of the files (or resources) the rules were compiled from, when compiled by rules/compiler.ts. */
  digest?: string;
}

/** A rule error: file, line, descriptor path and message; printed as `FILE:LINE: path: message`. */
export interface RuleError {
  file: string;
  line: number;
  path: string;
  message: string;
}

/** FILE:LINE: path: message; line 0 (no line: an unreadable directory, an xDS resource) leaves LINE out. */
export function formatRuleError(e: RuleError): string {
  return `${e.file}${e.line > 0 ? `:${e.line}` : ""}: ${e.path || "(top)"}: ${e.message}`;
}
