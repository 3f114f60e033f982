// algorithm: fixed_window (the default): requests_per_unit per epoch-aligned unit, as envoyproxy/ratelimit counts.
import { limitTag } from "../../core/keys.js";
import { UNIT_SECONDS } from "../limit.js";
import type { Algorithm } from "../algorithm.js";
import { decodeCount } from "../count.js";
import { windowedCheck, type WindowedCheck } from "../windowed.js";
import { fixedWindowBind, fixedWindowDecide, fixedWindowLevel, fixedWindowRefund, fixedWindowSave } from "./math.js";

export type FixedWindowCheck = WindowedCheck<"fixed_window">;

export const fixedWindow: Algorithm<FixedWindowCheck, number> = {
  name: "fixed_window",
  rule: {
    inRateLimit: true,
    ownKeys: [],
    approximate: true,
    capacity: (requestsPerUnit) => requestsPerUnit,
    keyTag: (l) => limitTag("fw", UNIT_SECONDS[l.unit]),
    explain: (l) => `${l.requestsPerUnit} per ${l.unit}, fixed_window`,
    rlconfig: () => "",
    settings: () => ({}),
  },
  // The even windows' key only: the script adds the odd windows' suffix itself (core/keys.ts
  // ODD_WINDOW_SUFFIX) when the store's time is in one. A key sent costs Redis about 2,300 instructions.
  wire: { id: 1, params: ["win"], keys: 1, reportsEnd: true },
  retryDependsOnCost: false,
  resetsAtEnd: true,
  calendar: false,
  ...windowedCheck("fixed_window"),
  keys: (c) => [c.key],
  bind: (c, nowMs) => fixedWindowBind(c.key, c.windowSeconds, nowMs),
  level: (c, stored, nowUs) => fixedWindowLevel(stored, c.windowSeconds, nowUs),
  decide: (c, count, hits, nowUs) => fixedWindowDecide(count, c.capacity, c.windowSeconds, hits, nowUs),
  save: (c, count, nowUs) => fixedWindowSave(count, c.windowSeconds, nowUs),
  decodeStored: decodeCount,
  refund: (c, stored, hits, chargedEndMs, nowUs) => fixedWindowRefund(stored, c.windowSeconds, hits, chargedEndMs, nowUs),
};
