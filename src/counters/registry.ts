// The algorithms sluice counts with: the one list. Rule validation, store checks, the Lua scripts'
// ids and layouts, explain and /rules all come from here; no other file branches on a name.
import type { Algorithm } from "./algorithm.js";
import { fixedWindow, type FixedWindowCheck } from "./fixed_window/index.js";
import { quota, type QuotaCheck } from "./quota/index.js";
import { referenceFixedWindow, type ReferenceFixedWindowCheck } from "./reference_fixed_window/index.js";
import { slidingWindow, type SlidingWindowCheck } from "./sliding_window/index.js";
import { tokenBucket, type TokenBucketCheck } from "./token_bucket/index.js";

/** One limit of one request, ready for the store: a union of each algorithm's check. */
export type Check = FixedWindowCheck | TokenBucketCheck | QuotaCheck | SlidingWindowCheck | ReferenceFixedWindowCheck;
export type AlgorithmName = Check["algorithm"];

/** Every algorithm; its Lua is lua/<name>.lua. */
export const ALGORITHMS: readonly Algorithm<Check>[] = [fixedWindow, tokenBucket, quota, slidingWindow, referenceFixedWindow] as unknown as Algorithm<Check>[];

const BY_NAME = new Map<string, Algorithm<Check>>(ALGORITHMS.map((a) => [a.name, a]));

/** The algorithm of a name the registry holds (a rule's, a check's). */
export function algorithm(name: AlgorithmName): Algorithm<Check> {
  return BY_NAME.get(name)!;
}

/** In reference-keys mode (SLUICE_REFERENCE_KEYS), the algorithm that counts as the reference does in its keys. */
const REFERENCE_FORM = new Map<string, Algorithm<Check>>([[fixedWindow.name, referenceFixedWindow as unknown as Algorithm<Check>]]);

/**
 * The algorithm a limit's checks use: its own, or in reference-keys mode the reference's form of it (fixed
 * windows; an approximate limit keeps sluice's keys, which its local view syncs with).
 */
export function checkAlgorithm(limit: { algorithm: AlgorithmName; approximate?: unknown }, referenceKeys: boolean): Algorithm<Check> {
  if (referenceKeys && limit.approximate === undefined) {
    const ref = REFERENCE_FORM.get(limit.algorithm);
    if (ref) return ref;
  }
  return algorithm(limit.algorithm);
}

/** Names a rate_limit's `algorithm:` takes, in registry order. */
export const RATE_LIMIT_ALGORITHMS: readonly AlgorithmName[] = ALGORITHMS.filter((a) => a.rule.inRateLimit).map((a) => a.name);

/** The default of a rate_limit's `algorithm:` (envoyproxy/ratelimit counts fixed windows). */
export const DEFAULT_ALGORITHM: AlgorithmName = "fixed_window";
