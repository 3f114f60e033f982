// Per-rule decision counters with the reference's meanings (total_hits, over_limit, near_limit, ...).
// The hot path only adds to plain numbers found through a WeakMap keyed by the Limit object; label
// strings are built once per rule (and once per request only for detailed_metric rules). metrics.ts
// turns the numbers into Prometheus series at scrape time.
import type { Limit, RuleLevel, RuleSet } from "../rules/model.js";
import type { Decision, Entry, LimitOutcome, RateLimitRequest } from "../limiter/types.js";

/** A request counts as near the limit from this share of the capacity used (after the request) on. */
export const NEAR_LIMIT_PERCENT = 80;
/** Distinct descriptor values kept per rule and limit for detailed_metric rules; later ones fold into OTHER_VALUES. */
export const DETAILED_VALUES_PER_RULE = 100;
export const OTHER_VALUES = "_other_";
/** Per-request limit overrides are not rules: they share one series per domain. */
export const OVERRIDE_RULE = "(override)";
/** Request values longer than this are cut in labels (Prometheus labels are not for payloads). */
const MAX_LABEL_VALUE = 64;

export interface RuleCounts {
  domain: string;
  /** The rule's path, e.g. "edge.api_key" (the reference's stats key without its prefix). */
  rule: string;
  /** Which limit of the descriptor: "rate_limit", "rate_limits[1]", "quota", "override". */
  limit: string;
  /** detailed_metric rules only: the request's entries, `k1=v1,k2=v2`, or OTHER_VALUES past the cap. */
  descriptor?: string;
  hits: number;
  overLimit: number;
  nearLimit: number;
  withinLimit: number;
  shadowMode: number;
  overLimitWithLocalCache: number;
  /** Limits answered by their failure_mode because the store failed: decisions, not hits. */
  policyAllow: number;
  policyDeny: number;
  policyLocal: number;
}

interface Tracked {
  counts: RuleCounts;
  /** detailed_metric only: one child per distinct descriptor value, at most `cap`, then `other`. */
  values?: Map<string, RuleCounts>;
  other?: RuleCounts;
}

export class RuleCounters {
  private readonly byName = new Map<string, Tracked>();
  private readonly byLimit = new WeakMap<Limit, Tracked>();

  constructor(private readonly detailedCap: number = DETAILED_VALUES_PER_RULE) {}

  /** Counts every limit outcome of one decided request. */
  observe(req: RateLimitRequest, decision: Decision): void {
    const outcomes = decision.outcomes;
    const shadowed = decision.shadowed === true;
    // Global shadow mode answered OK to a refused request: it consumed nothing all the same.
    const refused = decision.code === "OVER_LIMIT" || shadowed;
    for (let j = 0; j < outcomes.length; j++) {
      const o = outcomes[j];
      const t = this.byLimit.get(o.limit) ?? this.track(req.domain, o.limit);
      const counts = o.limit.detailedMetric ? this.detailed(t, req.descriptors[o.index].entries) : t.counts;
      count(counts, o, refused, shadowed);
    }
  }

  /** Creates zero series for every limit of these rules, so that a rule shows 0 before its first hit. */
  touch(rules: RuleSet): void {
    for (const [domain, d] of rules.domains) eachLimit(d.root, (l) => this.byLimit.get(l) ?? this.track(domain, l));
  }

  /** Every series so far, in creation order; a detailed_metric rule's own series only until it has values. */
  *all(): Iterable<RuleCounts> {
    for (const t of this.byName.values()) {
      if (!t.values) yield t.counts;
      else yield* t.values.values();
      if (t.other) yield t.other;
    }
  }

  private track(domain: string, limit: Limit): Tracked {
    const override = limit.label === "override";
    const rule = override ? OVERRIDE_RULE : limit.path;
    const name = `${domain}\0${rule}\0${limit.label}`;
    let t = this.byName.get(name);
    if (!t) {
      t = { counts: zero(domain, rule, limit.label) };
      this.byName.set(name, t);
    }
    // Overrides are new objects on every request: remembering them would only churn the WeakMap.
    if (!override) this.byLimit.set(limit, t);
    return t;
  }

  private detailed(t: Tracked, entries: Entry[]): RuleCounts {
    const label = descriptorLabel(entries);
    const values = (t.values ??= new Map());
    let c = values.get(label);
    if (c) return c;
    if (values.size >= this.detailedCap) {
      return (t.other ??= { ...zero(t.counts.domain, t.counts.rule, t.counts.limit), descriptor: OTHER_VALUES });
    }
    c = { ...zero(t.counts.domain, t.counts.rule, t.counts.limit), descriptor: label };
    values.set(label, c);
    return c;
  }
}

/**
 * The reference's meanings, per limit and in hits: total_hits always; over_limit when this limit
 * refused (a quota_mode limit too, even when the request passed), and over_limit_with_local_cache
 * too when the deny note answered; a refusal that a shadow mode overrode (the limit's shadow_mode,
 * or global shadow mode turning the answer to OK: `shadowed`) counts in shadow_mode instead;
 * within_limit whenever it allowed, and near_limit for the allowed hits that brought its use to
 * NEAR_LIMIT_PERCENT of the capacity or more.
 */
function count(c: RuleCounts, o: LimitOutcome, requestRefused: boolean, shadowed: boolean): void {
  const h = o.hits;
  c.hits += h;
  switch (o.via) {
    case "policy_allow":
      c.policyAllow++;
      break;
    case "policy_deny":
      c.policyDeny++;
      break;
    case "policy_local":
      c.policyLocal++;
      break;
  }
  if (!o.allowed) {
    if (o.limit.shadowMode || shadowed) {
      c.shadowMode += h;
    } else {
      c.overLimit += h;
      if (o.via === "deny_note") c.overLimitWithLocalCache += h;
    }
    return;
  }
  c.withinLimit += h;
  // Without a counter (unlimited, store down and no local count) there is no use to compare.
  if (h === 0 || o.limit.unlimited || (o.via !== "store" && o.via !== "policy_local")) return;
  const capacity = o.limit.algorithm === "token_bucket" ? o.limit.burst : o.limit.requestsPerUnit;
  let used = capacity - o.remaining;
  // A refused request consumed nothing: count the use it would have reached.
  if (requestRefused) used = Math.min(capacity, used + h);
  const nearFrom = Math.ceil((capacity * NEAR_LIMIT_PERCENT) / 100);
  const near = used - nearFrom + 1;
  if (near > 0) c.nearLimit += Math.min(near, h);
}

function zero(domain: string, rule: string, limit: string): RuleCounts {
  return {
    domain, rule, limit,
    hits: 0, overLimit: 0, nearLimit: 0, withinLimit: 0, shadowMode: 0, overLimitWithLocalCache: 0,
    policyAllow: 0, policyDeny: 0, policyLocal: 0,
  };
}

/** `k1=v1,k2=v2`, the syntax of `sluice explain --descriptor`; long values cut. */
export function descriptorLabel(entries: Entry[]): string {
  let s = "";
  for (let i = 0; i < entries.length; i++) {
    const v = entries[i].value;
    if (i > 0) s += ",";
    s += entries[i].key + "=" + (v.length > MAX_LABEL_VALUE ? v.slice(0, MAX_LABEL_VALUE) + "…" : v);
  }
  return s;
}

function eachLimit(level: RuleLevel, fn: (l: Limit) => void): void {
  const visit = (n: { limits: Limit[]; children: RuleLevel }) => {
    for (const l of n.limits) fn(l);
    eachLimit(n.children, fn);
  };
  for (const m of level.exact.values()) for (const n of m.values()) visit(n);
  for (const list of level.wildcards.values()) for (const n of list) visit(n);
  for (const n of level.keyOnly.values()) visit(n);
}
