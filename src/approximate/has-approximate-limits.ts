// Whether a rule set has approximate limits (to say at start that a store counting in this process
// decides them exactly).
import { levelNodes, type RuleLevel, type RuleSet } from "../rules/model.js";

export function hasApproximateLimits(rules: RuleSet): boolean {
  const walk = (level: RuleLevel): boolean => levelNodes(level).some((n) => n.limits.some((l) => l.approximate) || walk(n.children));
  for (const d of rules.domains.values()) if (walk(d.root)) return true;
  return false;
}
