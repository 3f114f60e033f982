// Per-request lookup of the limits for one descriptor. Hot path: only map lookups plus the
// wildcard list of the requested key; the only allocations are the result and its node list.
import type { RuleLevel, RuleNode } from "./model.js";

export interface Match {
  /** The leaf: its `limits` (never empty) and `metadata` apply to the request. */
  node: RuleNode;
  /** The matched node for each request entry, in order (nodes[i] matched entries[i]). */
  nodes: RuleNode[];
}

export function step(level: RuleLevel, key: string, value: string): RuleNode | undefined {
  const exact = level.exact.get(key)?.get(value);
  if (exact) return exact;
  const wild = level.wildcards.get(key);
  if (wild) {
    for (let i = 0; i < wild.length; i++) if (wild[i].match!(value)) return wild[i];
  }
  return level.keyOnly.get(key);
}

export function matchLimit(level: RuleLevel, entries: { key: string; value: string }[]): Match | undefined {
  const n = entries.length;
  if (n === 0) return undefined;
  // One walk; the node list is the only allocation besides the result.
  const nodes: RuleNode[] = new Array(n);
  let cur = level;
  for (let i = 0; i < n; i++) {
    const node = step(cur, entries[i].key, entries[i].value);
    if (!node) return undefined;
    nodes[i] = node;
    cur = node.children;
  }
  const node = nodes[n - 1];
  if (node.limits.length === 0) return undefined;
  return { node, nodes };
}
