// algorithm: token_bucket: a bucket of `burst` tokens (default requests_per_unit) refilled at
// requests_per_unit per unit, continuously.
import { limitTag, storeKey } from "../../core/keys.js";
import { UNIT_SECONDS } from "../limit.js";
import { bindKey, type Algorithm } from "../algorithm.js";
import type { CheckBase } from "../check.js";
import { decodeBucket, tokenBucketDecide, tokenBucketLevel, tokenBucketRefund, tokenBucketSave } from "./math.js";

export interface TokenBucketCheck extends CheckBase {
  algorithm: "token_bucket";
  /** Tokens added per second (requests_per_unit / unit seconds). */
  refillPerSecond: number;
}

export const tokenBucket: Algorithm<TokenBucketCheck, number> = {
  name: "token_bucket",
  rule: {
    inRateLimit: true,
    ownKeys: [{ key: "burst", min: 1 }],
    approximate: true,
    capacity: (requestsPerUnit, own) => own.get("burst") ?? requestsPerUnit,
    // The unit is named only when a descriptor has several buckets (keys of one bucket stay short).
    keyTag: (l, siblings) => limitTag("tb", siblings.filter((s) => s.algorithm === "token_bucket").length > 1 ? UNIT_SECONDS[l.unit] : undefined),
    explain: (l) => `${l.requestsPerUnit} per ${l.unit}, token_bucket, burst ${l.capacity}`,
    rlconfig: (l) => `, algorithm: token_bucket, burst: ${l.capacity}`,
    settings: (l) => ({ burst: l.capacity }),
  },
  wire: { id: 2, params: ["rate"], keys: 1, reportsEnd: false },
  retryDependsOnCost: true,
  resetsAtEnd: false,
  calendar: false,
  check: (l, ctx) => ({
    key: storeKey(ctx.hashTag, l.keyTag, ctx.keyPrefix),
    algorithm: "token_bucket",
    capacity: l.capacity,
    refillPerSecond: l.requestsPerUnit / UNIT_SECONDS[l.unit],
    hits: ctx.hits,
    shadow: ctx.shadow,
  }),
  params: (c) => [c.refillPerSecond],
  keys: (c) => [c.key],
  limitParam: (c) => c.refillPerSecond,
  bind: bindKey,
  level: (c, stored, nowUs) => tokenBucketLevel(stored, c.capacity, c.refillPerSecond, nowUs),
  decide: (c, tokens, hits) => tokenBucketDecide(tokens, c.capacity, c.refillPerSecond, hits),
  save: (c, tokens, nowUs) => tokenBucketSave(tokens, c.capacity, c.refillPerSecond, nowUs),
  refillPerSecond: (c) => c.refillPerSecond,
  decodeStored: decodeBucket,
  refund: (c, stored, hits, _end, nowUs) => tokenBucketRefund(stored, c.capacity, c.refillPerSecond, hits, nowUs),
};
