// envoyproxy/ratelimit's stat names (its src/stats/manager_impl.go, src/config/config_impl.go GetLimit,
// lyft/gostats tag serialisation), so a statsd pipeline built on the reference reads sluice's unchanged.
// Pure functions; rule-counters.ts calls the per-request ones only for detailed_metric rules, rules with
// value_to_metric on their path and per-request overrides.
import { descriptorPath, descriptorPathWithValue, entriesPath } from "../core/descriptor-path.js";
import type { DescriptorEntry } from "../limiter/types.js";
import type { Limit, RuleNode } from "../rules/model.js";

/** Scope of the per-rule counters: `<prefix><stats key>.<counter>`. */
export const RULE_STAT_PREFIX = "ratelimit.service.rate_limit.";

const IPV4 = /\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g;

/** utils.SanitizeStatName: ':' and '|' become '_', and the dots of an IPv4 address too. */
export function sanitizeStatName(s: string): string {
  return s.replace(/[:|]/g, "_").replace(IPV4, (ip) => ip.replaceAll(".", "_"));
}

/**
 * gostats' tags in the name: `.__key=value` per tag, sorted by key; pairs with an empty key or value
 * dropped; '.', ':' and '|' in values become '_' (tags.ReplaceChars). The reference sends no DogStatsD tags.
 */
export function tagSuffix(tags: Record<string, string>): string {
  let s = "";
  for (const key of Object.keys(tags).sort()) {
    const value = tags[key];
    if (key === "" || value === "") continue;
    s += `.__${key}=${value.replace(/[.:|]/g, "_")}`;
  }
  return s;
}

/**
 * The stats key of a limit as loaded (NewStats(FullKey)): its descriptor path. sluice's extra limits of one
 * descriptor (`rate_limits[1]`, a `quota` beside a `rate_limit`) have no reference name: each limit but the
 * descriptor's first adds its label (`.rate_limits_1`, `.quota`) so none is counted twice under one name.
 */
export function limitStatKey(limit: Limit, first: boolean): string {
  return first ? limit.path : `${limit.path}.${limit.label.replace(/\[(\d+)\]$/, "_$1")}`;
}

/**
 * detailed_metric: `domain.k1_v1.k2_v2` from the request's entries (the value always follows '_', even when
 * empty, as the reference writes it); with share_threshold on a matched wildcard node, that entry shows the
 * node's pattern instead and an empty value drops its '_'.
 */
export function detailedStatKey(domain: string, entries: readonly DescriptorEntry[], nodes: readonly RuleNode[] | undefined): string {
  const shared = nodes?.some((n) => n.shareThreshold);
  let s = domain;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    const n = nodes?.[i];
    if (!shared) s = descriptorPathWithValue(s, e.key, e.value);
    else if (n?.shareThreshold) s = descriptorPathWithValue(s, e.key, n.value);
    else s = descriptorPath(s, e.key, e.value);
  }
  return s;
}

/**
 * value_to_metric (GetLimit's valueToMetricFullKey): per matched node, the key and then: an exact value as
 * configured; a wildcard's pattern, or with share_threshold its pattern, or with value_to_metric the
 * request's value; a value-less key nothing, or with value_to_metric the request's value.
 */
export function valueToMetricStatKey(domain: string, entries: readonly DescriptorEntry[], nodes: readonly RuleNode[]): string {
  let s = domain;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    const n = nodes[i];
    let value: string;
    if (n.wildcard) value = n.shareThreshold || !n.valueToMetric ? n.value : e.value;
    else if (n.value !== "") value = e.value;
    else value = n.valueToMetric ? e.value : "";
    s = descriptorPath(s, e.key, value);
  }
  return s;
}

/** A per-request limit override: descriptorKey, `domain.k1_v1.k2` (no '_' for an empty value). */
export function overrideStatKey(domain: string, entries: readonly DescriptorEntry[]): string {
  return entriesPath(domain, entries);
}

/** Does the reference name this limit's stats per request value (value_to_metric on the path, not detailed)? */
export function namesByValue(nodes: readonly RuleNode[], limit: Limit): boolean {
  return !limit.detailedMetric && nodes.some((n) => n.valueToMetric === true);
}
