// `sluice explain`: for each descriptor of a request, which rule matches (path, file, line), its limits
// and the store keys they would use, or why nothing matches; for each RLQS bucket id the same, read as the
// descriptor of its entries sorted by key, and the assignment it gets. Pure: reads rules, never the store.
import { algorithm, checkAlgorithm } from "../counters/registry.js";
import { bucketEntries, bucketProblem } from "../core/bucket-id.js";
import { oddWindowKey } from "../core/keys.js";
import { NO_SECRETS, type SecretValues } from "../core/secret.js";
import { descriptorPath } from "../core/descriptor-path.js";
import { limitStoreKey } from "../limiter/explain-keys.js";
import type { DescriptorEntry, DescriptorRequest } from "../limiter/types.js";
import { matchLimit, step as matchStep } from "../rules/match.js";
import { levelNodes, type DomainRules, type Limit, type RuleLevel, type RuleNode, type RuleSet } from "../rules/model.js";

/**
 * Parses `k=v[,k=v...]`. Entries are split at `,`, key from value at the first `=`; a backslash makes
 * the next character literal (`\,` `\=` `\\`), so any key and value can be written.
 */
export function parseDescriptorArg(text: string): DescriptorEntry[] {
  const entries: DescriptorEntry[] = [];
  let key: string | undefined;
  let cur = "";
  const end = () => {
    if (key === undefined) throw new Error(`descriptor entry '${cur}' has no '=' (expected key=value)`);
    if (key === "") throw new Error("descriptor entry with an empty key");
    entries.push({ key, value: cur });
    key = undefined;
    cur = "";
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") {
      if (i + 1 === text.length) throw new Error("descriptor ends with a lone '\\'");
      cur += text[++i];
    } else if (c === "=" && key === undefined) {
      key = cur;
      cur = "";
    } else if (c === ",") {
      end();
    } else {
      cur += c;
    }
  }
  end();
  return entries;
}

/** The inverse of parseDescriptorArg, for printing. */
function formatDescriptorArg(entries: DescriptorEntry[]): string {
  const esc = (s: string) => s.replace(/[\\,=]/g, (c) => "\\" + c);
  return entries.map((e) => `${esc(e.key)}=${esc(e.value)}`).join(",");
}

/**
 * Parses a bucket id `k=v[,k=v...]` (as a descriptor, same escapes) into its entries sorted by key, as sluice
 * reads an RLQS bucket id (core/bucket-id.ts). A key given twice or an empty value is an error, as on the wire.
 */
export function parseBucketArg(text: string): DescriptorEntry[] {
  const entries = bucketEntries(parseDescriptorArg(text).map((e) => [e.key, e.value] as const));
  const problem = bucketProblem(entries);
  if (problem) throw new Error(problem);
  return entries;
}

/**
 * `keyPrefix`: the deployment's --key-prefix, shown in the keys; `referenceKeys`: its SLUICE_REFERENCE_KEYS;
 * `secrets`: its secret keys, whose values show as the keyed hash the store keys, logs and /top hold (learned
 * from these rules: SecretValues.learn); `buckets`: RLQS bucket ids (parseBucketArg).
 */
export function explain(
  rules: RuleSet,
  domainName: string,
  descriptors: DescriptorEntry[][],
  nowMs: number,
  keyPrefix = "",
  referenceKeys = false,
  secrets: SecretValues = NO_SECRETS,
  buckets: DescriptorEntry[][] = [],
): string {
  const shown = (entries: DescriptorEntry[]) => formatDescriptorArg(entries.map((e) => ({ key: e.key, value: secrets.shownValue(e.key, e.value) })));
  const out: string[] = [];
  const domain = rules.domains.get(domainName);
  if (!domain) {
    const known =
      [...rules.domains.keys()]
        .sort()
        .map((d) => `'${d}'`)
        .join(", ") || "none";
    out.push(`domain '${domainName}' is not in the rules (domains: ${known}): sluice answers OK to every descriptor of it`);
    if (buckets.length > 0) out.push("and ALLOW_ALL to every RLQS bucket of it");
    return out.join("\n") + "\n";
  }
  out.push(`domain ${domain.domain}: ${domain.files.join(", ")} (failure_mode ${domain.failureMode} unless a descriptor says otherwise)`);

  const requests: DescriptorRequest[] = descriptors.map((entries) => ({ entries }));
  const matches = requests.map((d) => matchLimit(domain.root, d.entries));
  // `replaces` works across the descriptors of one request, as in the limiter.
  const replacedBy = new Map<string, number>();
  matches.forEach((m, i) => {
    for (const l of m?.node.limits ?? []) for (const name of l.replaces) if (!replacedBy.has(name)) replacedBy.set(name, i);
  });

  requests.forEach((d, i) => {
    out.push("", `descriptor ${i + 1}: ${shown(d.entries)}`);
    const m = matches[i];
    if (!m) {
      out.push(`  no rule: ${whyNoMatch(domain, d.entries)}`);
      out.push("  this descriptor is not limited: status OK, nothing counted");
      return;
    }
    explainMatch(out, domain, d, m, replacedBy, nowMs, keyPrefix, referenceKeys, secrets);
  });
  // Each bucket alone: an RLQS request meets one bucket per filter, and `replaces` works only within a request's descriptors.
  buckets.forEach((entries, i) => {
    out.push("", `bucket ${i + 1}: ${shown(entries)} (the descriptor of its entries sorted by key)`);
    const m = matchLimit(domain.root, entries);
    if (!m) {
      out.push(`  no rule: ${whyNoMatch(domain, entries)}`);
      out.push("  RLQS: ALLOW_ALL (the default for a bucket no rule matches), nothing counted");
      return;
    }
    explainMatch(out, domain, { entries }, m, new Map(), nowMs, keyPrefix, false, secrets); // RLQS counts in sluice's own keys
    out.push(`  RLQS: ${bucketAssignment(m.node.limits)}`);
  });
  return out.join("\n") + "\n";
}

/**
 * What an RLQS stream assigns a bucket whose rule has these limits: as rlqs/buckets.ts decides it (shadow limits
 * are not counted; a limit of 0 denies; only unlimited ones allow; otherwise leases from the counters).
 */
export function bucketAssignment(limits: readonly Limit[]): string {
  const inForce = limits.filter((l) => !l.shadowMode);
  if (inForce.some((l) => l.requestsPerUnit === 0 && !l.unlimited)) return "DENY_ALL (a limit of 0), nothing counted";
  const counted = inForce.filter((l) => !l.unlimited);
  if (counted.length === 0) return "ALLOW_ALL (no limit in force is counted), nothing counted";
  return `leases: units taken from the key${counted.length > 1 ? "s" : ""} above before Envoy may spend them, sent as token buckets; DENY_ALL once the window's units are all leased`;
}

function explainMatch(
  out: string[],
  domain: DomainRules,
  d: DescriptorRequest,
  m: NonNullable<ReturnType<typeof matchLimit>>,
  replacedBy: Map<string, number>,
  nowMs: number,
  keyPrefix: string,
  referenceKeys: boolean,
  secrets: SecretValues,
): void {
  const shown = (e: DescriptorEntry) => formatDescriptorArg([{ key: e.key, value: secrets.shownValue(e.key, e.value) }]);
  out.push(`  rule: ${secrets.path(m.node.limits[0])} (${where(m.node)})`);
  out.push("  matched:");
  for (const [j, e] of d.entries.entries()) out.push(`    ${shown(e)}  ${matchedBy(m.nodes[j], secrets)} (${where(m.nodes[j])})`);
  out.push("  limits:");
  for (const l of m.node.limits) {
    out.push(`    ${l.label}: ${describeLimit(l)} (${l.source.file}:${l.source.line})`);
    const by = l.name !== "" ? replacedBy.get(l.name) : undefined;
    if (by !== undefined) {
      out.push(`      not checked: replaced by a limit of descriptor ${by + 1} (replaces name '${l.name}')`);
      continue;
    }
    const key = limitStoreKey(domain.domain, d, m.nodes, l, nowMs, keyPrefix, referenceKeys, secrets);
    if (key === undefined) out.push("      key: none (no counter is kept)");
    else if (l.period) out.push(`      key: ${key} (the UTC ${l.period} of ${new Date(nowMs).toISOString()})`);
    else if (checkAlgorithm(l, referenceKeys).name === "fixed_window") out.push(`      key: ${key} (even windows; odd windows: ${oddWindowKey(key)})`);
    else out.push(`      key: ${key}`);
  }
}

function where(n: RuleNode): string {
  return `${n.source.file}:${n.source.line}`;
}

function matchedBy(n: RuleNode, secrets: SecretValues): string {
  if (n.value === "") return `by key '${n.key}' (any value: each value counted apart)`;
  if (!n.wildcard) return `by value '${secrets.shownValue(n.key, n.value)}'`;
  const shared = n.shareThreshold ? ": all matching values share one counter (share_threshold)" : ": each value counted apart";
  return `by pattern '${n.value}'${shared}`;
}

function describeLimit(l: Limit): string {
  const parts: string[] = [];
  if (l.unlimited) parts.push("unlimited");
  else if (l.requestsPerUnit === 0 && !algorithm(l.algorithm).calendar) parts.push(`0 per ${l.unit}: refuses every request`);
  else parts.push(algorithm(l.algorithm).rule.explain(l));
  if (l.approximate) parts.push(`approximate (leases of up to ${l.approximate.syncIntervalMs} ms)`);
  parts.push(`failure_mode ${l.failureMode}`);
  if (l.shadowMode) parts.push("shadow_mode (counted, never refuses)");
  if (l.quotaMode) parts.push("quota_mode (refuses the request only when every quota_mode descriptor of it is over)");
  if (l.name !== "") parts.push(`name '${l.name}'`);
  if (l.replaces.length > 0) parts.push(`replaces ${l.replaces.map((r) => `'${r}'`).join(", ")}`);
  if (l.detailedMetric) parts.push("detailed_metric");
  return parts.join(", ");
}

/** Walks the rule tree as the matcher does and says where the request left it. */
function whyNoMatch(domain: DomainRules, entries: DescriptorEntry[]): string {
  let level = domain.root;
  let path = domain.domain;
  let shorter: string | undefined;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    const node = matchStep(level, e.key, e.value);
    if (!node) {
      const miss = missAt(level, e, path, i === 0);
      return shorter ? `${miss}; sluice does not fall back to the shorter rule ${shorter}` : miss;
    }
    path = descriptorPath(path, node.key, node.value);
    if (node.limits.length > 0) shorter = `${path} (${where(node)})`;
    level = node.children;
  }
  return `${path} has no limit of its own: a request must end at a descriptor with a limit`;
}

function missAt(level: RuleLevel, e: DescriptorEntry, path: string, top: boolean): string {
  const nodes = levelNodes(level);
  const at = top ? `at the top of domain ${path}` : `under ${path}`;
  if (nodes.length === 0) return `entry ${formatDescriptorArg([e])}: ${path} has no nested descriptors`;
  const sameKey = nodes.filter((n) => n.key === e.key);
  if (sameKey.length === 0) {
    const keys = [...new Set(nodes.map((n) => n.key))].sort().join(", ");
    return `entry ${formatDescriptorArg([e])}: no descriptor with key '${e.key}' ${at} (keys there: ${keys})`;
  }
  const values = sameKey.map((n) => `'${n.value}'`).join(", ");
  return `entry ${formatDescriptorArg([e])}: no descriptor for value '${e.value}' of key '${e.key}' ${at} (values there: ${values})`;
}
