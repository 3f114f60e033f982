// `quota: {period: day | month, limit: N}`: a calendar total in UTC next to a descriptor's rate limits.
import { limitTag, quotaKeyTag, storeKey } from "../../core/keys.js";
import { PeriodCache } from "../calendar.js";
import type { QuotaPeriod } from "../limit.js";
import type { Algorithm } from "../algorithm.js";
import { decodeCount } from "../count.js";
import type { CheckBase } from "../check.js";
import { parseQuotaBlock } from "./rule.js";
import { quotaBind, quotaDecide, quotaLevel, quotaRefund, quotaSave, type QuotaPeriods } from "./math.js";

export interface QuotaCheck extends CheckBase {
  algorithm: "quota";
  /** Two adjacent calendar periods around the caller's clock; the key is the first's. */
  periods: QuotaPeriods;
}

// A memo of date arithmetic (pure: the same answer for the same time), so most checks do none.
const periodCaches: Record<QuotaPeriod, PeriodCache> = { day: new PeriodCache("day"), month: new PeriodCache("month") };

export const quota: Algorithm<QuotaCheck, number> = {
  name: "quota",
  rule: {
    inRateLimit: false,
    block: { key: "quota", parse: parseQuotaBlock },
    ownKeys: [],
    // Its block has no approximate key: a quota that bills must be exact.
    approximate: false,
    capacity: (requestsPerUnit) => requestsPerUnit,
    keyTag: () => limitTag("q"),
    explain: (l) => `${l.requestsPerUnit} per ${l.period} (calendar quota, UTC)`,
    rlconfig: (l) => `, algorithm: quota (calendar ${l.period}, UTC)`,
    settings: (l) => ({ period: l.period! }),
  },
  wire: { id: 3, params: ["start", "boundary", "stop"], keys: 2, reportsEnd: true },
  retryDependsOnCost: false,
  resetsAtEnd: true,
  calendar: true,
  check: (l, ctx) => {
    const { first, second } = periodCaches[l.period!].pairAt(ctx.nowMs);
    return {
      key: storeKey(ctx.hashTag, quotaKeyTag(first.label), ctx.keyPrefix),
      algorithm: "quota",
      capacity: l.capacity,
      hits: ctx.hits,
      shadow: ctx.shadow,
      periods: {
        nextKey: storeKey(ctx.hashTag, quotaKeyTag(second.label), ctx.keyPrefix),
        startMs: first.startMs,
        boundaryMs: first.endMs,
        endMs: second.endMs,
      },
    };
  },
  params: (c) => [c.periods.startMs, c.periods.boundaryMs, c.periods.endMs],
  keys: (c) => [c.key, c.periods.nextKey],
  limitParam: () => 0,
  bind: (c, nowMs) => quotaBind(c.key, c.periods, nowMs),
  level: (_c, stored) => quotaLevel(stored),
  decide: (c, count, hits, nowUs, b) => quotaDecide(count, c.capacity, hits, nowUs, b.periodEndMs),
  save: (_c, count, _nowUs, b) => quotaSave(count, b.periodEndMs),
  decodeStored: decodeCount,
  refund: (_c, stored, hits, chargedEndMs, _nowUs, b) => quotaRefund(stored, hits, chargedEndMs, b.periodEndMs),
};
