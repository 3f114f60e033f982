// Per-rule decision counters with the reference's meanings (total_hits, over_limit, near_limit, ...).
// The hot path only adds to plain numbers found through a WeakMap keyed by the Limit object; label
// strings are built once per rule (and once per request only for detailed_metric rules). metrics.ts
// turns the numbers into Prometheus series at scrape time.
import { NO_SECRETS, type SecretValues } from "../core/secret.js";
import { SETTINGS } from "../core/settings-table.js";
import type { Limit, RuleLevel, RuleNode, RuleSet } from "../rules/model.js";
import type { Decision, DescriptorEntry, LimitOutcome, RateLimitRequest } from "../limiter/types.js";
import { detailedStatKey, limitStatKey, namesByValue, overrideStatKey, valueToMetricStatKey } from "./statsd-names.js";

/** The reference's NEAR_LIMIT_RATIO default: hits past floor(capacity x ratio) are near the limit. */
export const DEFAULT_NEAR_LIMIT_RATIO = SETTINGS.NEAR_LIMIT_RATIO.default;
/** Distinct descriptor values kept per rule and limit for detailed_metric rules; later ones fold into OTHER_VALUES. */
export const DETAILED_VALUES_PER_RULE = SETTINGS.DETAILED_METRIC_MAX_VALUES.default;
const OTHER_VALUES = "_other_";
/** Per-request limit overrides are not rules: they share one series per domain. */
const OVERRIDE_RULE = "(override)";
/**
 * Zero series are made for at most this many limits: past it (per-customer rule sets), a limit's series
 * appears at its first hit, so that a reload walks no more and a scrape shows no more than this many idle rules.
 */
const ZERO_SERIES_MAX = 10_000;
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
  /** With stat keys on (the statsd sink): the reference's stats key of these counts (statsd-names.ts). */
  stat?: string;
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
  /** Stat keys on: the limit's matched path (for detailed and value_to_metric names). */
  nodes?: RuleNode[];
  /** Stat keys on, value_to_metric paths and overrides: counts per reference stats key, at most `cap`. */
  byStat?: Map<string, RuleCounts>;
  statOther?: RuleCounts;
}

export class RuleCounters {
  private readonly byName = new Map<string, Tracked>();
  private readonly byLimit = new WeakMap<Limit, Tracked>();

  /** statKeys: also keep the reference's stats keys (statSeries), for the statsd sink; off, nothing is added per call. */
  /** nearLimitRatio: SLUICE_NEAR_LIMIT_RATIO, kept as the float32 the reference holds it in (a Go float32). */
  constructor(
    private readonly detailedCap: number = DETAILED_VALUES_PER_RULE,
    private readonly statKeys = false,
    nearLimitRatio: number = DEFAULT_NEAR_LIMIT_RATIO,
    private readonly secrets: SecretValues = NO_SECRETS,
  ) {
    this.nearRatio32 = Math.fround(nearLimitRatio);
  }

  private readonly nearRatio32: number;

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
      count(counts, o, refused, shadowed, this.nearRatio32);
      if (t.byStat) count(this.byStat(t, req.domain, o.limit, req.descriptors[o.index].entries), o, refused, shadowed, this.nearRatio32);
    }
  }

  /**
   * Creates zero series for every limit of these rules, so that a rule shows 0 before its first hit; only
   * the domains that differ from `previous` are walked (a reload costs what changed). Without stat keys,
   * only while the rules hold at most ZERO_SERIES_MAX limits.
   */
  touch(rules: RuleSet, previous?: RuleSet): void {
    const changed = [...rules.domains].filter(([name, d]) => previous?.domains.get(name) !== d);
    if (!this.statKeys) {
      let total = 0;
      for (const d of rules.domains.values()) total += d.ruleCount;
      if (total > ZERO_SERIES_MAX) return;
      for (const [domain, d] of changed) eachLimit(d.root, (l) => this.byLimit.get(l) ?? this.track(domain, l));
      return;
    }
    // Names follow the rules in force: a reload may change value_to_metric or which limit comes first.
    for (const [domain, d] of changed) {
      eachLimitPath(d.root, [], (l, nodes, first) => {
        const t = this.byLimit.get(l) ?? this.track(domain, l);
        t.nodes = nodes;
        t.counts.stat = limitStatKey(l, first);
        if (namesByValue(nodes, l)) t.byStat ??= new Map();
        else t.byStat = undefined;
      });
    }
  }

  /** Every series under its reference stats key (statKeys on); several may share one key. */
  *statSeries(): Iterable<RuleCounts & { stat: string }> {
    for (const t of this.byName.values()) {
      const plain = t.counts.stat ?? t.counts.rule;
      if (t.byStat) {
        for (const c of t.byStat.values()) yield c as RuleCounts & { stat: string };
        if (t.statOther) yield { ...t.statOther, stat: plain };
      } else if (t.values) {
        for (const c of t.values.values()) yield { ...c, stat: c.stat ?? plain };
        if (t.other) yield { ...t.other, stat: plain };
      } else {
        yield { ...t.counts, stat: plain };
      }
    }
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
    const rule = override ? OVERRIDE_RULE : this.secrets.path(limit);
    const name = `${domain}\0${rule}\0${limit.label}`;
    let t = this.byName.get(name);
    if (!t) {
      t = { counts: zero(domain, rule, limit.label) };
      this.byName.set(name, t);
      if (override && this.statKeys) {
        t.byStat = new Map();
        t.counts.stat = `${domain}._override_`;
      }
    }
    // Overrides are new objects on every request: remembering them would only churn the WeakMap.
    if (!override) this.byLimit.set(limit, t);
    return t;
  }

  private detailed(t: Tracked, entries: DescriptorEntry[]): RuleCounts {
    const label = descriptorLabel(entries, this.secrets);
    const values = (t.values ??= new Map());
    let c = values.get(label);
    if (c) return c;
    if (values.size >= this.detailedCap) {
      return (t.other ??= { ...zero(t.counts.domain, t.counts.rule, t.counts.limit), descriptor: OTHER_VALUES });
    }
    c = { ...zero(t.counts.domain, t.counts.rule, t.counts.limit), descriptor: label };
    if (this.statKeys) c.stat = detailedStatKey(t.counts.domain, entries, t.nodes);
    values.set(label, c);
    return c;
  }

  /** The counts under this request's reference stats key; past `cap` keys, under the rule's own key. */
  private byStat(t: Tracked, domain: string, limit: Limit, entries: DescriptorEntry[]): RuleCounts {
    const stat = t.nodes && !(limit.label === "override") ? valueToMetricStatKey(domain, entries, t.nodes) : overrideStatKey(domain, entries);
    const map = t.byStat!;
    let c = map.get(stat);
    if (c) return c;
    if (map.size >= this.detailedCap) return (t.statOther ??= zero(t.counts.domain, t.counts.rule, t.counts.limit));
    c = { ...zero(t.counts.domain, t.counts.rule, t.counts.limit), stat };
    map.set(stat, c);
    return c;
  }
}

/**
 * The reference's meanings, per limit and in hits: total_hits always; over_limit when this limit
 * refused (a quota_mode limit too, even when the request passed), and over_limit_with_local_cache
 * too when the deny note answered; a refusal that a shadow mode overrode (the limit's shadow_mode,
 * or global shadow mode turning the answer to OK: `shadowed`) counts in shadow_mode instead;
 * within_limit whenever it allowed, and near_limit for the allowed hits that took its use past
 * nearThreshold (the reference's rule: the window's hit number n is near when n > the threshold).
 */
function count(c: RuleCounts, o: LimitOutcome, requestRefused: boolean, shadowed: boolean, ratio32: number): void {
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
  if (h === 0 || o.limit.unlimited || (o.via !== "store" && o.via !== "policy_local" && o.via !== "approximate")) return;
  const capacity = o.limit.capacity;
  let used = capacity - o.remaining;
  // A refused request consumed nothing: count the use it would have reached.
  if (requestRefused) used = Math.min(capacity, used + h);
  const near = used - nearThreshold(capacity, ratio32);
  if (near > 0) c.nearLimit += Math.min(near, h);
}

/** floor(float32(capacity) x ratio) in float32 arithmetic, as the reference's base_limiter.go computes it. */
export function nearThreshold(capacity: number, ratio32: number): number {
  return Math.floor(Math.fround(Math.fround(capacity) * ratio32));
}

function zero(domain: string, rule: string, limit: string): RuleCounts {
  return {
    domain,
    rule,
    limit,
    hits: 0,
    overLimit: 0,
    nearLimit: 0,
    withinLimit: 0,
    shadowMode: 0,
    overLimitWithLocalCache: 0,
    policyAllow: 0,
    policyDeny: 0,
    policyLocal: 0,
  };
}

/** `k1=v1,k2=v2`, the syntax of `sluice explain --descriptor`; long values cut. */
export function descriptorLabel(entries: DescriptorEntry[], secrets: SecretValues = NO_SECRETS): string {
  let s = "";
  for (let i = 0; i < entries.length; i++) {
    const v = secrets.shownValue(entries[i].key, entries[i].value);
    if (i > 0) s += ",";
    s += entries[i].key + "=" + (v.length > MAX_LABEL_VALUE ? v.slice(0, MAX_LABEL_VALUE) + "…" : v);
  }
  return s;
}

/** Every limit with the nodes from the domain's top to its descriptor, and whether it is the descriptor's first. */
function eachLimitPath(level: RuleLevel, above: RuleNode[], fn: (l: Limit, nodes: RuleNode[], first: boolean) => void): void {
  const visit = (n: RuleNode) => {
    const nodes = [...above, n];
    for (const [i, l] of n.limits.entries()) fn(l, nodes, i === 0);
    eachLimitPath(n.children, nodes, fn);
  };
  for (const m of level.exact.values()) for (const n of m.values()) visit(n);
  for (const list of level.wildcards.values()) for (const n of list) visit(n);
  for (const n of level.keyOnly.values()) visit(n);
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
