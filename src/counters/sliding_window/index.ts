// algorithm: sliding_window: at most requests_per_unit in any unit-long span, estimated from this
// window's count and the previous window's, weighted (math.ts).
import { limitTag, storeKey } from "../../limiter/keys.js";
import { UNIT_SECONDS } from "../../rules/model.js";
import { bindKey, type Algorithm } from "../algorithm.js";
import type { CheckBase } from "../check.js";
import { slidingDecide, slidingLevel, slidingRefund, slidingSave, type SlidingLevel } from "./math.js";

export interface SlidingWindowCheck extends CheckBase {
  algorithm: "sliding_window";
  /** Window length in seconds (epoch-aligned windows; the span slides). */
  windowSeconds: number;
}

export const slidingWindow: Algorithm<SlidingWindowCheck, SlidingLevel> = {
  name: "sliding_window",
  rule: {
    inRateLimit: true,
    ownKeys: [],
    capacity: (requestsPerUnit) => requestsPerUnit,
    keyTag: (l) => limitTag("sw", UNIT_SECONDS[l.unit]),
    explain: (l) => `${l.requestsPerUnit} per ${l.unit}, sliding_window`,
    rlconfig: () => ", algorithm: sliding_window",
    settings: () => ({}),
  },
  wire: { id: 4, params: ["win"], keys: 1, reportsEnd: true },
  retryDependsOnCost: true,
  resetsAtEnd: false,
  calendar: false,
  check: (l, ctx) => ({
    key: storeKey(ctx.hashTag, l.keyTag, ctx.keyPrefix),
    algorithm: "sliding_window",
    capacity: l.capacity,
    windowSeconds: UNIT_SECONDS[l.unit],
    hits: ctx.hits,
    shadow: ctx.shadow,
  }),
  params: (c) => [c.windowSeconds],
  keys: (c) => [c.key],
  limitParam: (c) => c.windowSeconds,
  bind: bindKey,
  level: (c, stored, nowUs) => slidingLevel(stored, c.windowSeconds, nowUs),
  decide: (c, level, hits, nowUs) => slidingDecide(level, c.capacity, c.windowSeconds, hits, nowUs),
  save: (c, level, nowUs) => slidingSave(level, c.windowSeconds, nowUs),
  refund: (c, stored, hits, chargedEndMs) => slidingRefund(stored, c.windowSeconds, hits, chargedEndMs),
};
