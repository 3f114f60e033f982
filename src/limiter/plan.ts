// Planning a request: each limit in force (match-request.ts found them) becomes an item, with the store
// check it needs and the store group to ask.
import { checkAlgorithm } from "../counters/registry.js";
import { UNIT_SECONDS, type Limit } from "../rules/model.js";
import type { Check, CheckResult, Store } from "../store/store.js";
import { UNLIMITED_REMAINING, type Item, type Plan } from "./limit-items.js";
import { descriptorTag, referenceKeyBase } from "../core/keys.js";
import type { SecretValues } from "../core/secret.js";
import type { Matched } from "./match-request.js";
import type { RateLimitRequest } from "./types.js";

/** Turns each limit in force into an item with the store check it needs (none for a static answer). */
export function plan(
  req: RateLimitRequest,
  matched: Matched | undefined,
  nowMs: number,
  items: Item[],
  store: Store,
  keyPrefix: string,
  approximateView: boolean,
  referenceKeys?: { countsRefused: boolean },
  secrets?: SecretValues,
): Plan {
  if (!matched) return NO_PLAN;
  const { limits, nodes, replaced, metadata, quota, quotaCount } = matched;
  const n = req.descriptors.length;
  const requestHits = req.hitsAddend === 0 ? 1 : req.hitsAddend;
  let approximateCount = 0;

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
      tag ??= descriptorTag(req.domain, d, nodes[i], secrets);
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
