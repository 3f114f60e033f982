// lua/reference_fixed_window.lua and math.ts agree: random sequences across window boundaries, several
// checks per call (the same key twice, shadow limits, refused requests that still count), dry runs and refunds.
// Windows of a minute and more: the key's TTL runs on Redis's own clock, which must not expire it mid-window.
import { describe } from "vitest";
import { rng, runParity, type ParityStep } from "../../../test/helpers/parity.js";
import type { FixedWindowCheck } from "../fixed_window/index.js";
import type { ReferenceFixedWindowCheck } from "./index.js";

describe("reference_fixed_window parity", () => {
  runParity((seed) => {
    const r = rng(seed);
    // One setting per key, as in a process (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT is process-wide).
    const keys = [0, 1].map((k) => ({ key: `d_k_${seed}.${k}_`, capacity: r.int(1, 6), windowSeconds: r.pick([60, 120]), countsRefused: r.chance(0.7) }));
    const steps: ParityStep[] = [];
    for (let i = 0; i < 25; i++) {
      const checks: (ReferenceFixedWindowCheck | FixedWindowCheck)[] = [];
      for (let j = r.int(1, 3); j > 0; j--) {
        const k = r.pick(keys);
        const hits = r.chance(0.1) ? r.int(0, k.capacity + 2) : 1;
        // A sluice fixed window beside them: a refusal by either leaves the other as each algorithm says.
        const { countsRefused, ...window } = k;
        if (r.chance(0.2)) checks.push({ ...window, key: `fw:${seed}`, algorithm: "fixed_window", hits, shadow: false });
        else checks.push({ ...k, algorithm: "reference_fixed_window", hits, shadow: r.chance(0.2), countsRefused });
      }
      steps.push({ advanceMs: r.chance(0.2) ? r.int(30_000, 70_000) : r.int(0, 700), checks, dryRun: r.chance(0.1), refund: r.chance(0.2) });
    }
    return steps;
  }, 120);
});
