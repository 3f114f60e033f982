// The loaded rules as plain JSON for GET /rules: domains -> descriptor tree in file order, each
// descriptor and limit with the file and line it comes from, and the RLQS buckets in use (a bounded sample).
// Read-only view; nothing secret lives in rules.
import { algorithm } from "../counters/registry.js";
import { descriptorPath } from "../core/descriptor-path.js";
import { levelNodes, type Limit, type RuleLevel, type RuleSet } from "../rules/model.js";

interface LimitJson {
  label: string;
  unlimited: boolean;
  unit?: string;
  requests_per_unit?: number;
  algorithm?: string;
  burst?: number;
  period?: string;
  /** Present only for an approximate limit. */
  approximate?: { sync_interval_ms: number };
  failure_mode: string;
  shadow_mode: boolean;
  /** Present (true) only for a quota_mode limit (global quota mode, QUOTA_MODE, is not shown here). */
  quota_mode?: boolean;
  name?: string;
  replaces?: string[];
  source: { file: string; line: number };
}

interface DescriptorJson {
  key: string;
  value?: string;
  /** The rule path (the reference's stats key), e.g. "edge.api_key". */
  path: string;
  source: { file: string; line: number };
  limits: LimitJson[];
  share_threshold?: boolean;
  detailed_metric?: boolean;
  value_to_metric?: boolean;
  metadata?: Record<string, unknown>;
  descriptors?: DescriptorJson[];
}

/**
 * One RLQS bucket of a stream as /rules and /ui show it (rlqs/stream.ts fills it in): demand in requests a second (allowed and denied, to 2
 * decimals), the assignment in force, the time to live it was sent with (whole seconds, 0: none sent) and the
 * ms left of it as sluice counts (from sending; Envoy's timer starts on arrival).
 */
export interface RlqsBucketView {
  domain: string;
  bucket: Record<string, string>;
  demand: number;
  assignment: string;
  ttl_seconds: number;
  remaining_ms: number;
}

/** The RLQS service as /rules reads it: its bucket count and at most `max` of its buckets (rlqs/stream.ts says what each holds). */
export interface RlqsBucketSource {
  readonly counters: { readonly buckets: number };
  buckets(max: number): RlqsBucketView[];
}

/** RLQS buckets in use: how many, and the first RLQS_BUCKETS_SHOWN of them. */
export interface RlqsJson {
  buckets_total: number;
  buckets: RlqsBucketView[];
}

/** RLQS buckets shown in /rules at most: the view stays small whatever the fleet reports. */
export const RLQS_BUCKETS_SHOWN = 100;

interface RulesJson {
  domains: Record<string, { files: string[]; failure_mode: string; rule_count: number; descriptors: DescriptorJson[] }>;
  /** Absent while no RLQS bucket is in use. */
  rlqs?: RlqsJson;
}

export function rulesJson(rules: RuleSet, rlqs?: RlqsBucketSource): RulesJson {
  const domains: RulesJson["domains"] = {};
  for (const [name, d] of rules.domains) {
    domains[name] = { files: d.files, failure_mode: d.failureMode, rule_count: d.ruleCount, descriptors: levelJson(d.root, name) };
  }
  const buckets = rlqsJson(rlqs);
  return buckets ? { domains, rlqs: buckets } : { domains };
}

/** GET /rules' `only`: absent (the rules and the RLQS buckets) or `rlqs` (the buckets alone); anything else, undefined. */
export function rulesOnly(q: URLSearchParams | undefined): "all" | "rlqs" | undefined {
  const only = q?.get("only") ?? null;
  return only === null ? "all" : only === "rlqs" ? "rlqs" : undefined;
}

/** The 400 answer's text for another `only`. */
export const RULES_ONLY_ERROR = "only takes rlqs (the RLQS buckets in use, without the rules)\n";

/** Several processes' buckets (--workers) as one: their totals added, the first RLQS_BUCKETS_SHOWN of their buckets. */
export function mergeRlqs(parts: readonly (RlqsJson | null | undefined)[]): RlqsJson | undefined {
  let total = 0;
  const buckets: RlqsBucketView[] = [];
  for (const p of parts) {
    if (!p) continue;
    total += p.buckets_total;
    for (const b of p.buckets) if (buckets.length < RLQS_BUCKETS_SHOWN) buckets.push(b);
  }
  return total === 0 ? undefined : { buckets_total: total, buckets };
}

/**
 * /rules' `rlqs` field, alone for `/rules?only=rlqs` (what /ui polls every second: the rules' JSON may be large).
 * Undefined while no bucket is in use: without RLQS, /rules is the rules alone.
 */
export function rlqsJson(rlqs: RlqsBucketSource | undefined): RlqsJson | undefined {
  if (!rlqs || rlqs.counters.buckets === 0) return undefined;
  return { buckets_total: rlqs.counters.buckets, buckets: rlqs.buckets(RLQS_BUCKETS_SHOWN) };
}

function levelJson(level: RuleLevel, parentPath: string): DescriptorJson[] {
  return levelNodes(level).map((n) => {
    const path = descriptorPath(parentPath, n.key, n.value);
    const out: DescriptorJson = { key: n.key, path, source: n.source, limits: n.limits.map(limitJson) };
    if (n.value !== "") out.value = n.value;
    if (n.shareThreshold) out.share_threshold = true;
    if (n.detailedMetric) out.detailed_metric = true;
    if (n.valueToMetric) out.value_to_metric = true;
    if (n.metadata) out.metadata = n.metadata;
    const children = levelJson(n.children, path);
    if (children.length > 0) out.descriptors = children;
    return out;
  });
}

function limitJson(l: Limit): LimitJson {
  const out: LimitJson = { label: l.label, unlimited: l.unlimited, failure_mode: l.failureMode, shadow_mode: l.shadowMode, source: l.source };
  if (!l.unlimited) {
    out.unit = l.unit;
    out.requests_per_unit = l.requestsPerUnit;
    out.algorithm = l.algorithm;
    Object.assign(out, algorithm(l.algorithm).rule.settings(l));
  }
  if (l.approximate) out.approximate = { sync_interval_ms: l.approximate.syncIntervalMs };
  if (l.quotaMode) out.quota_mode = true;
  if (l.name !== "") out.name = l.name;
  if (l.replaces.length > 0) out.replaces = l.replaces;
  return out;
}
