// The rules in force as the reference's GET /rlconfig prints them: one line per limit,
//   <domain>.<key>[_<value>]...: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false
// descriptors depth-first in file order (the reference's order is Go's map order, i.e. none). sluice's
// extensions follow on the same line only where used: the limit's label when a descriptor has several,
// the algorithm when not a fixed window, the sync interval of an approximate limit.
import { algorithm } from "../counters/registry.js";
import { levelNodes, type Limit, type RuleLevel, type RuleSet } from "../rules/model.js";

export function rlconfigText(rules: RuleSet): string {
  let out = "";
  for (const d of rules.domains.values()) out += level(d.root);
  return out;
}

function level(l: RuleLevel): string {
  let out = "";
  for (const node of levelNodes(l)) {
    for (const limit of node.limits) out += line(limit, node.limits.length > 1);
    out += level(node.children);
  }
  return out;
}

function line(l: Limit, several: boolean): string {
  const unit = l.unlimited ? "UNKNOWN" : l.unit.toUpperCase();
  const perUnit = l.unlimited ? 0 : l.requestsPerUnit;
  let text = `${l.path}: unit=${unit} requests_per_unit=${perUnit}, shadow_mode: ${l.shadowMode}, quota_mode: ${l.quotaMode}`;
  if (several) text += `, limit: ${l.label}`;
  if (!l.unlimited) text += algorithm(l.algorithm).rule.rlconfig(l);
  if (l.approximate) text += `, approximate: sync_interval_ms ${l.approximate.syncIntervalMs}`;
  return text + "\n";
}
