// lua/fixed_window.lua and math.ts agree: random sequences across window boundaries, several checks
// per call (the same key twice, shadow limits), dry runs and refunds.
import { describe } from "vitest";
import { rng, runParity, type ParityStep } from "../../../test/helpers/parity.js";
import type { FixedWindowCheck } from "./index.js";

describe("fixed_window parity", () => {
  runParity((seed) => {
    const r = rng(seed);
    const keys = [0, 1].map((k) => ({ key: `fw:${seed}:${k}`, capacity: r.int(0, 6), windowSeconds: r.pick([1, 2, 60]) }));
    const steps: ParityStep[] = [];
    for (let i = 0; i < 25; i++) {
      const checks: FixedWindowCheck[] = [];
      for (let j = r.int(1, 3); j > 0; j--) {
        const k = r.pick(keys);
        checks.push({ ...k, algorithm: "fixed_window", hits: r.chance(0.1) ? r.int(0, k.capacity + 2) : 1, shadow: r.chance(0.2) });
      }
      const long = r.chance(0.1);
      steps.push({ advanceMs: long ? r.int(1000, 61_000) : r.int(0, 700), checks, dryRun: r.chance(0.1), refund: r.chance(0.2) });
    }
    return steps;
  }, 150);
});
