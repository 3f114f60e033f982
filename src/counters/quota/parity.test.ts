// lua/quota.lua and math.ts agree: the store's clock picks one of the two periods sent, across day
// boundaries, and both refuse a clock outside them; costs, several checks per call, refunds.
import { describe } from "vitest";
import { rng, runParity, type ParityStep } from "../../../test/helpers/parity.js";
import type { Limit } from "../../rules/model.js";
import { quota, type QuotaCheck } from "./index.js";

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

describe("quota parity", () => {
  runParity(
    (seed, startMs) => {
      const r = rng(seed);
      const limits = [0, 1].map((k) => ({ tag: `q:${seed}:${k}`, limit: { period: r.pick(["day", "month"] as const), capacity: r.int(0, 6) } as Limit }));
      const steps: ParityStep[] = [];
      let nowMs = startMs;
      for (let i = 0; i < 25; i++) {
        const advanceMs = r.chance(0.2) ? r.int(HOUR_MS, 14 * HOUR_MS) : r.int(0, 60_000);
        nowMs += advanceMs;
        // Now and then the caller's clock is behind by half a day: the store may find itself outside the periods sent.
        const callerMs = r.chance(0.1) ? nowMs - 13 * HOUR_MS : nowMs;
        const checks: QuotaCheck[] = [];
        for (let j = r.int(1, 3); j > 0; j--) {
          const { tag, limit } = r.pick(limits);
          const hits = r.chance(0.15) ? r.int(0, limit.capacity + 2) : 1;
          checks.push(quota.check(limit, { hashTag: tag, keyPrefix: "", hits, shadow: r.chance(0.2), nowMs: callerMs }));
        }
        steps.push({ advanceMs, checks, dryRun: r.chance(0.1), refund: r.chance(0.2) });
      }
      return steps;
    },
    100,
    {
      errors: true,
      // The calendar decides what a sequence meets (a lagging caller is refused only soon after midnight): each
      // seed starts at its own time of day after the next UTC midnight, the same in every run, not at the wall clock's.
      start: (seed, realMs) => Math.ceil(realMs / DAY_MS) * DAY_MS + ((seed * 787_000) % DAY_MS),
    },
  );
});
