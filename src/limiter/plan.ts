// Planning a request: matches its descriptors, applies `replaces`, finds the quota-mode ones and turns
// each limit in force into an item, with the store check it needs.
import { checkAlgorithm } from "../counters/registry.js";
import { UNIT_SECONDS, type Limit, type RuleNode, type RuleSet } from "../rules/model.js";
import { matchLimit } from "../rules/match.js";
import type { Check, CheckResult, Store } from "../store/store.js";
import { UNLIMITED_REMAINING, type Item, type Plan } from "./limit-items.js";
import { descriptorTag, referenceKeyBase } from "../core/keys.js";
import { overrideLimit } from "./override.js";
import type { Decision, RateLimitRequest } from "./types.js";

/** Matches each descriptor and turns its limits into items with store checks. */
export function plan(
  req: RateLimitRequest,
  nowMs: number,
  items: Item[],
  rules: RuleSet,
  store: Store,
  keyPrefix: string,
  globalQuotaMode: boolean,
  approximateView: boolean,
  referenceKeys?: { countsRefused: boolean },
): Plan {
  const domain = rules.domains.get(req.domain);
  if (!domain) return NO_PLAN;
  const n = req.descriptors.length;
  const requestHits = req.hitsAddend === 0 ? 1 : req.hitsAddend;
  const limits: (readonly Limit[] | undefined)[] = new Array(n);
  const nodes: (RuleNode[] | undefined)[] = new Array(n);
  let replaced: Set<string> | undefined;
  let metadata: Decision["metadata"];
  let approximateCount = 0;

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

  for (let i = 0; i < n; i++) {
    const list = limits[i];
    if (!list) continue;
    // A refusal of a limit of one of several quota-mode descriptors must not stop the store from
    // consuming the others (the store counts it as shadow: it consumes nothing itself); the limiter
    // decides and refunds when they all refused. The only quota-mode descriptor refuses as any other.
    const nonBlocking = quotaCount > 1 && quota![i] === 1;
    const d = req.descriptors[i];
    const hits = d.hits ?? requestHits;
    let tag: string | undefined;
    let refKey: string | undefined;
    let group = 0;
    let groupUnit = 0; // the unit (seconds) `group` was asked for; 0 = not asked yet
    for (const limit of list) {
      if (replaced && limit.name !== "" && replaced.has(limit.name)) continue;
      if (limit.unlimited) {
        items.push({ index: i, limit, hits, group: 0, result: UNLIMITED_RESULT, via: "static" });
        continue;
      }
      if (limit.requestsPerUnit === 0) {
        // Blocks everything; no counter to keep.
        items.push({ index: i, limit, hits, group: 0, result: blockedResult(limit), via: "static" });
        continue;
      }
      tag ??= descriptorTag(req.domain, d, nodes[i]);
      // The store may keep per-second limits apart (split-by-unit.ts): it is asked again when the unit changes.
      const unitSeconds = UNIT_SECONDS[limit.unit];
      if (unitSeconds !== groupUnit) {
        group = store.groupOf(tag, unitSeconds);
        groupUnit = unitSeconds;
      }
      if (referenceKeys) refKey ??= referenceKeyBase(keyPrefix, req.domain, d, nodes[i]);
      const check = toCheck(tag, limit, hits, nowMs, nonBlocking, keyPrefix, referenceKeys, refKey);
      const approximate = approximateView && limit.approximate !== undefined;
      if (approximate) approximateCount++;
      items.push({ index: i, limit, hits, check, group, result: NOT_EVALUATED, via: approximate ? "approximate" : "store" });
    }
  }
  return metadata || quota || approximateCount > 0 ? { metadata, quota, quotaCount, approximateCount } : NO_PLAN;
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

function toCheck(
  tag: string,
  limit: Limit,
  hits: number,
  nowMs: number,
  nonBlocking: boolean,
  keyPrefix: string,
  referenceKeys: { countsRefused: boolean } | undefined,
  referenceKey: string | undefined,
): Check {
  const ctx = {
    hashTag: tag,
    keyPrefix,
    hits,
    shadow: limit.shadowMode || nonBlocking,
    nowMs,
    referenceKey,
    referenceCountsRefused: referenceKeys?.countsRefused,
  };
  return checkAlgorithm(limit, referenceKeys !== undefined).check(limit, ctx);
}

const NO_PLAN: Plan = { metadata: undefined, quota: undefined, quotaCount: 0, approximateCount: 0 };
const UNLIMITED_RESULT: CheckResult = { allowed: true, remaining: UNLIMITED_REMAINING, resetSeconds: 0, retryAfterMs: -1, periodEndMs: 0 };
const NOT_EVALUATED: CheckResult = { allowed: true, remaining: 0, resetSeconds: 0, retryAfterMs: -1, periodEndMs: 0 };

function blockedResult(limit: Limit): CheckResult {
  return { allowed: false, remaining: 0, resetSeconds: UNIT_SECONDS[limit.unit], retryAfterMs: -1, periodEndMs: 0 };
}
