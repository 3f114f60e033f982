// lua/sliding_window.lua and math.ts agree: the weighted estimate, Retry-After and reset across
// window boundaries, costs, several checks per call, dry runs and refunds (also after the charged
// window became the previous one).
import { describe } from "vitest";
import { rng, runParity, type ParityStep } from "../../../test/helpers/parity.js";
import type { SlidingWindowCheck } from "./index.js";

describe("sliding_window parity", () => {
  runParity((seed) => {
    const r = rng(seed);
    const keys = [0, 1].map((k) => ({ key: `sw:${seed}:${k}`, capacity: r.int(0, 8), windowSeconds: r.pick([1, 2, 60]) }));
    const steps: ParityStep[] = [];
    for (let i = 0; i < 30; i++) {
      const checks: SlidingWindowCheck[] = [];
      for (let j = r.int(1, 3); j > 0; j--) {
        const k = r.pick(keys);
        checks.push({ ...k, algorithm: "sliding_window", hits: r.chance(0.15) ? r.int(0, k.capacity + 2) : 1, shadow: r.chance(0.2) });
      }
      const long = r.chance(0.1);
      steps.push({ advanceMs: long ? r.int(1000, 130_000) : r.int(0, 400), checks, dryRun: r.chance(0.1), refund: r.chance(0.2) });
    }
    return steps;
  }, 150);
});
