// algorithm: sliding_window: at most requests_per_unit in any unit-long span, estimated from this
// window's count and the previous window's, weighted (math.ts).
import { limitTag } from "../../core/keys.js";
import { UNIT_SECONDS } from "../limit.js";
import type { Algorithm } from "../algorithm.js";
import { windowedCheck, type WindowedCheck } from "../windowed.js";
import { decodeSliding, slidingDecide, slidingLevel, slidingRefund, slidingSave, type SlidingLevel } from "./math.js";

export type SlidingWindowCheck = WindowedCheck<"sliding_window">;

export const slidingWindow: Algorithm<SlidingWindowCheck, SlidingLevel> = {
  name: "sliding_window",
  rule: {
    inRateLimit: true,
    ownKeys: [],
    approximate: true,
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
  ...windowedCheck("sliding_window"),
  level: (c, stored, nowUs) => slidingLevel(stored, c.windowSeconds, nowUs),
  decide: (c, level, hits, nowUs) => slidingDecide(level, c.capacity, c.windowSeconds, hits, nowUs),
  save: (c, level, nowUs) => slidingSave(level, c.windowSeconds, nowUs),
  decodeStored: decodeSliding,
  refund: (c, stored, hits, chargedEndMs) => slidingRefund(stored, c.windowSeconds, hits, chargedEndMs),
};
