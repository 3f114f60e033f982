// The store key a limit would use for a descriptor, for `sluice explain`: the limiter's own key
// functions (core/keys.ts), so explain can never drift from what the limiter writes.
import { checkAlgorithm } from "../counters/registry.js";
import type { Limit, RuleNode } from "../rules/model.js";
import { PeriodCache } from "../counters/calendar.js";
import { descriptorTag, quotaKeyTag, referenceKeyBase, storeKey } from "../core/keys.js";
import type { SecretValues } from "../core/secret.js";
import type { DescriptorRequest } from "./types.js";

/**
 * The key of `limit` for descriptor `d` matched through `nodes` at time `nowMs` (a quota's key names
 * its current UTC period); undefined for limits kept without a counter (unlimited, requests_per_unit 0).
 * `referenceKeys` (SLUICE_REFERENCE_KEYS): the key the limiter's check binds to at that time. `secrets`: as the
 * limiter hashes secret values in keys.
 */
export function limitStoreKey(
  domain: string,
  d: DescriptorRequest,
  nodes: RuleNode[],
  limit: Limit,
  nowMs: number,
  prefix = "",
  referenceKeys = false,
  secrets?: SecretValues,
): string | undefined {
  if (limit.unlimited || limit.requestsPerUnit === 0) return undefined;
  const tag = descriptorTag(domain, d, nodes, secrets);
  if (referenceKeys) {
    const a = checkAlgorithm(limit, true);
    const ctx = { hashTag: tag, keyPrefix: prefix, hits: 1, shadow: false, nowMs, referenceKey: referenceKeyBase(prefix, domain, d, nodes) };
    return a.bind(a.check(limit, ctx), nowMs).key;
  }
  if (!limit.period) return storeKey(tag, limit.keyTag, prefix);
  const { first, second } = new PeriodCache(limit.period).pairAt(nowMs);
  return storeKey(tag, quotaKeyTag((nowMs < first.endMs ? first : second).label), prefix);
}
