// Merging the items' results into the answer: each descriptor's status, whether the request is
// refused (the reference's quota-mode rule) and its Retry-After.
import { algorithm } from "../counters/registry.js";
import { UNLIMITED_REMAINING, type Item, type Plan } from "./limit-items.js";
import type { Decision, DescriptorDecision, LimitOutcome } from "./types.js";

/**
 * Statuses per descriptor and the overall answer. A status is its limits' own verdict: a quota-mode
 * descriptor over its limit is OVER_LIMIT in a request that passes, as in the reference. Retry-After:
 * every refusal of an ordinary descriptor must clear; when all quota-mode descriptors refused, the
 * first of them to clear is enough. Global shadow mode answers OK where the request is refused.
 */
export function decide(n: number, items: Item[], plan: Plan, globalShadow: boolean): Decision {
  const statuses: DescriptorDecision[] = new Array(n);
  const outcomes: LimitOutcome[] = new Array(items.length);
  const quota = plan.quota;
  // Per quota-mode descriptor that refused: ms until its refusals clear (-1 never), its quotas' period end.
  let quotaRetry: number[] | undefined;
  let quotaEnd: number[] | undefined;
  let quotaOver = 0;
  let retryMs = 0;
  let quotaResetsAtMs = 0;
  for (let j = 0; j < items.length; j++) {
    const it = items[j];
    const r = it.result;
    const refused = refuses(it);
    outcomes[j] = { index: it.index, limit: it.limit, hits: it.hits, allowed: r.allowed, remaining: refused || r.allowed ? r.remaining : 0, via: it.via };
    const status = toStatus(it, refused);
    statuses[it.index] = moreRestrictive(statuses[it.index], status);
    if (!refused) continue;
    const end = algorithm(it.limit.algorithm).calendar && r.periodEndMs > 0 ? r.periodEndMs : 0;
    const k = it.index;
    if (quota !== undefined && quota[k] === 1) {
      quotaRetry ??= new Array(n);
      quotaEnd ??= new Array(n).fill(0);
      if (quotaRetry[k] === undefined) quotaOver++;
      quotaRetry[k] = latest(quotaRetry[k] ?? 0, r.retryAfterMs);
      quotaEnd[k] = Math.max(quotaEnd[k], end);
      continue;
    }
    retryMs = latest(retryMs, r.retryAfterMs);
    quotaResetsAtMs = Math.max(quotaResetsAtMs, end);
  }
  if (quotaOver > 0 && quotaOver === plan.quotaCount) {
    let first: number | undefined;
    let firstEnd = 0;
    for (let k = 0; k < n; k++) {
      const t = quotaRetry![k];
      if (t === undefined) continue;
      if (first === undefined || (t !== -1 && (first === -1 || t < first))) {
        first = t;
        firstEnd = quotaEnd![k];
      }
    }
    retryMs = latest(retryMs, first!);
    quotaResetsAtMs = Math.max(quotaResetsAtMs, firstEnd);
  }
  for (let i = 0; i < n; i++) statuses[i] ??= { code: "OK", remaining: 0 };
  const refused = requestRefused(items, plan);
  const decision: Decision = { code: refused && !globalShadow ? "OVER_LIMIT" : "OK", statuses, outcomes };
  if (refused && globalShadow) {
    decision.shadowed = true;
  } else if (refused) {
    if (retryMs > 0) decision.retryAfterSeconds = Math.max(Math.ceil(retryMs / 1000), 1);
    if (quotaResetsAtMs > 0) decision.quotaResetsAtMs = quotaResetsAtMs;
  }
  if (plan.metadata) decision.metadata = plan.metadata;
  return decision;
}

/**
 * The reference's rule: refused when a limit of an ordinary descriptor refused, or when every
 * quota-mode descriptor has a limit that refused.
 */
export function requestRefused(items: Item[], plan: Plan): boolean {
  const quota = plan.quota;
  if (!quota) return items.some(refuses);
  let over: Uint8Array | undefined;
  let overCount = 0;
  for (const it of items) {
    if (!refuses(it)) continue;
    if (quota[it.index] === 0) return true;
    over ??= new Uint8Array(quota.length);
    if (over[it.index] === 0) {
      over[it.index] = 1;
      overCount++;
    }
  }
  return overCount === plan.quotaCount;
}

/** A non-shadow limit that refused: its descriptor is OVER_LIMIT (the request too, unless in quota mode). */
function refuses(it: Item): boolean {
  return !it.result.allowed && !it.limit.shadowMode;
}

function toStatus(it: Item, refused: boolean): DescriptorDecision {
  const r = it.result;
  if (it.limit.unlimited) return { code: "OK", limit: it.limit, remaining: UNLIMITED_REMAINING };
  // A shadow limit that would refuse reports OK with nothing left.
  if (!refused) return { code: "OK", limit: it.limit, remaining: r.allowed ? r.remaining : 0, resetSeconds: r.resetSeconds };
  // Nothing is left for this request: x-ratelimit-remaining 0 on a 429, as the reference reports.
  return { code: "OVER_LIMIT", limit: it.limit, remaining: 0, resetSeconds: r.resetSeconds, retryAfterMs: r.retryAfterMs };
}

/** The refusing limit that frees up last wins; among passing limits, the one with the least left. */
function moreRestrictive(a: DescriptorDecision | undefined, b: DescriptorDecision): DescriptorDecision {
  if (!a) return b;
  if (a.code !== b.code) return a.code === "OVER_LIMIT" ? a : b;
  if (a.code === "OVER_LIMIT") {
    const ra = a.retryAfterMs ?? -1;
    const rb = b.retryAfterMs ?? -1;
    if (ra === -1) return a;
    if (rb === -1) return b;
    return rb > ra ? b : a;
  }
  return b.remaining < a.remaining ? b : a;
}

/** Retry-After ms of refusals that must all clear: the latest; -1 (never) wins. */
function latest(a: number, b: number): number {
  return a === -1 || b === -1 ? -1 : Math.max(a, b);
}
