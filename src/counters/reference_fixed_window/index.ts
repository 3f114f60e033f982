// envoyproxy/ratelimit's fixed window, in its own keys (SLUICE_REFERENCE_KEYS): what fixed_window limits
// count with while reference instances share the Redis (a rolling swap). Not a rule's choice: the
// registry's checkAlgorithm picks it for fixed windows when the mode is on.
import { UNIT_SECONDS } from "../limit.js";
import type { Algorithm } from "../algorithm.js";
import type { CheckBase } from "../check.js";
import { decodeCount } from "../count.js";
import { referenceWindowBind, referenceWindowDecide, referenceWindowLevel, referenceWindowSave } from "./math.js";

export interface ReferenceFixedWindowCheck extends CheckBase {
  algorithm: "reference_fixed_window";
  /** Window length in seconds (the reference's unit divider: a month is 30 days, a year 365). */
  windowSeconds: number;
  /** A refused request counts too (the reference's default). */
  countsRefused: boolean;
}

export const referenceFixedWindow: Algorithm<ReferenceFixedWindowCheck, number> = {
  name: "reference_fixed_window",
  rule: {
    inRateLimit: false,
    ownKeys: [],
    approximate: false,
    capacity: (requestsPerUnit) => requestsPerUnit,
    keyTag: () => "",
    explain: (l) => `${l.requestsPerUnit} per ${l.unit}, fixed_window in the reference's keys`,
    rlconfig: () => "",
    settings: () => ({}),
  },
  wire: { id: 5, params: ["win", "refused"], keys: 1, reportsEnd: true },
  retryDependsOnCost: false,
  resetsAtEnd: true,
  calendar: false,
  check: (l, ctx) => ({
    // The key without its window start: the store's clock adds it (bind).
    key: ctx.referenceKey!,
    algorithm: "reference_fixed_window",
    capacity: l.capacity,
    windowSeconds: UNIT_SECONDS[l.unit],
    hits: ctx.hits,
    shadow: ctx.shadow,
    countsRefused: ctx.referenceCountsRefused ?? true,
  }),
  params: (c) => [c.windowSeconds, c.countsRefused ? 1 : 0],
  countsRefused: (c) => c.countsRefused,
  keys: (c) => [c.key],
  limitParam: (c) => c.windowSeconds,
  bind: (c, nowMs) => referenceWindowBind(c.key, c.windowSeconds, nowMs),
  level: (_c, stored) => referenceWindowLevel(stored),
  decide: (c, count, hits, nowUs) => referenceWindowDecide(count, c.capacity, c.windowSeconds, hits, nowUs),
  save: (c, count, nowUs) => referenceWindowSave(count, c.windowSeconds, nowUs),
  decodeStored: decodeCount,
  refund: () => undefined,
};
