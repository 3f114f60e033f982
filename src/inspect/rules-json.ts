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

/** An RLQS bucket of an open stream (rlqs/stream.ts): its domain, id, demand a second and assignment in force. */
interface RlqsBucketJson {
  domain: string;
  bucket: Record<string, string>;
  demand: number;
  assignment: string;
}

/** The RLQS service as /rules reads it: its bucket count and at most `max` of its buckets. */
export interface RlqsBucketSource {
  readonly counters: { readonly buckets: number };
  buckets(max: number): RlqsBucketJson[];
}

/** RLQS buckets shown in /rules at most: the view stays small whatever the fleet reports. */
export const RLQS_BUCKETS_SHOWN = 100;

interface RulesJson {
  domains: Record<string, { files: string[]; failure_mode: string; rule_count: number; descriptors: DescriptorJson[] }>;
  /** RLQS buckets in use (absent when none): how many, and the first RLQS_BUCKETS_SHOWN of them. */
  rlqs?: { buckets_total: number; buckets: RlqsBucketJson[] };
}

export function rulesJson(rules: RuleSet, rlqs?: RlqsBucketSource): RulesJson {
  const domains: RulesJson["domains"] = {};
  for (const [name, d] of rules.domains) {
    domains[name] = { files: d.files, failure_mode: d.failureMode, rule_count: d.ruleCount, descriptors: levelJson(d.root, name) };
  }
  // Only while RLQS buckets are in use: without RLQS, /rules is the rules alone.
  if (!rlqs || rlqs.counters.buckets === 0) return { domains };
  return { domains, rlqs: { buckets_total: rlqs.counters.buckets, buckets: rlqs.buckets(RLQS_BUCKETS_SHOWN) } };
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
