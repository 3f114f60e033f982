// Matching a request: each descriptor's limits in force (its rule's, or its own `limit` override), the
// names `replaces` takes out, the matched rules' metadata and the quota-mode descriptors.
import type { Limit, RuleNode, RuleSet } from "../rules/model.js";
import { matchLimit } from "../rules/match.js";
import { overrideLimit } from "./override.js";
import type { Decision, RateLimitRequest } from "./types.js";

/** What matching found, by descriptor index. */
export interface Matched {
  /** The limits of the descriptor's rule or override; undefined when nothing matched. */
  limits: (readonly Limit[] | undefined)[];
  /** The rule node matched for each entry (share_threshold shapes the key); undefined for an override. */
  nodes: (RuleNode[] | undefined)[];
  /** Names of limits some matched limit replaces. */
  replaced: Set<string> | undefined;
  metadata: Decision["metadata"];
  /** Quota-mode descriptors by index (1), when the request has any. */
  quota: Uint8Array | undefined;
  quotaCount: number;
}

/** The request's matches; undefined when its domain has no rules. */
export function matchRequest(req: RateLimitRequest, rules: RuleSet, globalQuotaMode: boolean): Matched | undefined {
  const domain = rules.domains.get(req.domain);
  if (!domain) return undefined;
  const n = req.descriptors.length;
  const limits: (readonly Limit[] | undefined)[] = new Array(n);
  const nodes: (RuleNode[] | undefined)[] = new Array(n);
  let replaced: Set<string> | undefined;
  let metadata: Decision["metadata"];

  for (let i = 0; i < n; i++) {
    const d = req.descriptors[i];
    if (d.override) {
      limits[i] = [overrideLimit(req.domain, d, domain.failureMode)];
      continue;
    }
    const m = matchLimit(domain.root, d.entries);
    if (!m) continue;
    limits[i] = m.node.limits;
    nodes[i] = m.nodes;
    if (m.node.metadata) (metadata ??= []).push({ index: i, metadata: m.node.metadata });
    for (const l of m.node.limits) {
      if (l.replaces.length === 0) continue;
      replaced ??= new Set();
      for (const name of l.replaces) replaced.add(name);
    }
  }

  let quota: Uint8Array | undefined;
  let quotaCount = 0;
  for (let i = 0; i < n; i++) {
    if (!inQuotaMode(limits[i], replaced, globalQuotaMode)) continue;
    (quota ??= new Uint8Array(n))[i] = 1;
    quotaCount++;
  }
  return { limits, nodes, replaced, metadata, quota, quotaCount };
}

/**
 * A descriptor in quota mode, as the reference decides it: not an unlimited one (replaced or not);
 * under global quota mode every other one, even one no rule matched (it never refuses, so such a
 * request is never refused by its quota-mode descriptors); else one with a quota_mode limit in force.
 */
function inQuotaMode(list: readonly Limit[] | undefined, replaced: Set<string> | undefined, globalQuotaMode: boolean): boolean {
  if (list) for (const l of list) if (l.unlimited) return false;
  if (globalQuotaMode) return true;
  if (!list) return false;
  for (const l of list) if (l.quotaMode && !(replaced && l.name !== "" && replaced.has(l.name))) return true;
  return false;
}
