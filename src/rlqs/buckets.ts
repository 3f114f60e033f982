// A bucket id to the rules: its entries (sorted by key, core/bucket-id.ts) matched against the domain's
// rule tree as a descriptor is, and the store checks of the limits found. Pure: no store, no clock but
// the `nowMs` a calendar quota's check is built around.
import type { BucketEntry } from "../core/bucket-id.js";
import { descriptorTag } from "../core/keys.js";
import { checkAlgorithm } from "../counters/registry.js";
import { matchLimit } from "../rules/match.js";
import type { Limit, RuleSet } from "../rules/model.js";
import type { Check, Store } from "../store/store.js";

/** What the rules say of a bucket. */
export type BucketRule =
  /** No rule of the domain matches (or no such domain): the default assignment. */
  | { kind: "none" }
  /** Every limit in force is unlimited or shadow: nothing to count, allow all. */
  | { kind: "allow"; limits: readonly Limit[] }
  /** A limit of 0 requests: deny all, nothing to count. */
  | { kind: "deny"; limits: readonly Limit[] }
  /** Limits counted in the store: leases are taken from each check (one store group: one hash tag). */
  | { kind: "leases"; limits: readonly Limit[]; checks: Check[]; group: number };

export function bucketRule(rules: RuleSet, domain: string, entries: readonly BucketEntry[], store: Store, keyPrefix: string, nowMs: number): BucketRule {
  const d = rules.domains.get(domain);
  if (!d) return { kind: "none" };
  const m = matchLimit(d.root, entries as BucketEntry[]);
  if (!m) return { kind: "none" };
  const limits = m.node.limits.filter((l) => !l.shadowMode);
  if (limits.some((l) => l.requestsPerUnit === 0 && !l.unlimited)) return { kind: "deny", limits };
  const counted = limits.filter((l) => !l.unlimited);
  if (counted.length === 0) return { kind: "allow", limits: m.node.limits };
  const tag = descriptorTag(domain, { entries }, m.nodes);
  const checks = counted.map((limit) => checkAlgorithm(limit, false).check(limit, { hashTag: tag, keyPrefix, hits: 0, shadow: false, nowMs }));
  // Every key of one descriptor shares its hash tag: one store group. The reference's per-second split is by unit; the first limit's decides.
  return { kind: "leases", limits: counted, checks, group: store.groupOf(tag) };
}
