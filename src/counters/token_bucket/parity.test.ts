// lua/token_bucket.lua and math.ts agree (the one test holding the two together): one-check requests
// (apply1), fractional refills, costs, several checks per call, dry runs and refunds. Buckets take 30 s
// or more to fill, so their keys (EX, by Redis's own clock) live through a whole sequence, as they do by
// the pinned clock.
import { describe } from "vitest";
import { rng, runParity, type ParityStep } from "../../../test/helpers/parity.js";
import type { TokenBucketCheck } from "./index.js";

describe("token_bucket parity", () => {
  runParity((seed) => {
    const r = rng(seed);
    const keys = [0, 1].map((k) => {
      const capacity = r.int(1, 10);
      return { key: `tb:${seed}:${k}`, capacity, refillPerSecond: capacity / r.pick([30, 45, 60, 3600]) };
    });
    const steps: ParityStep[] = [];
    for (let i = 0; i < 25; i++) {
      const checks: TokenBucketCheck[] = [];
      for (let j = r.int(1, 3); j > 0; j--) {
        const k = r.pick(keys);
        checks.push({ ...k, algorithm: "token_bucket", hits: r.chance(0.2) ? r.int(0, k.capacity + 2) : 1, shadow: r.chance(0.2) });
      }
      steps.push({ advanceMs: r.chance(0.2) ? r.int(1000, 20_000) : r.int(0, 900), checks, dryRun: r.chance(0.1), refund: r.chance(0.2) });
    }
    return steps;
  }, 150);
});
