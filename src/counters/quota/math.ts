// Calendar quota maths, step for step as lua/quota.lua: a count per UTC period in a key named by the
// period, expiring at its end. The check carries two adjacent periods; the store's clock picks one.
import type { Bound, Stored, Verdict } from "../check.js";
import { countDecide, storedCount } from "../count.js";

export interface QuotaPeriods {
  /** Key of the second period (the first is the check's key). */
  nextKey: string;
  /** Start of the first period, start of the second (= end of the first), end of the second; ms since the epoch. */
  startMs: number;
  boundaryMs: number;
  endMs: number;
}

/** The period that holds the store's time (as lua/quota.lua's bind). */
export function quotaBind(key: string, p: QuotaPeriods, nowMs: number): Bound {
  if (nowMs < p.startMs || nowMs >= p.endMs) {
    throw new Error("sluice: store clock outside the quota periods sent (clock skew of half a period?)");
  }
  return nowMs < p.boundaryMs ? { key, periodEndMs: p.boundaryMs } : { key: p.nextKey, periodEndMs: p.endMs };
}

export function quotaLevel(stored: Stored | undefined): number {
  return stored ? storedCount(stored.value) : 0;
}

export function quotaDecide(count: number, cap: number, hits: number, nowUs: number, periodEndMs: number): Verdict<number> {
  return countDecide(count, cap, hits, nowUs, periodEndMs);
}

export function quotaSave(count: number, periodEndMs: number): Stored {
  return { value: count, expiresAtMs: periodEndMs };
}

/** Only while the charged period is the one in force: else its key is gone or going. Keeps the TTL. */
export function quotaRefund(stored: Stored | undefined, hits: number, chargedEndMs: number, periodEndMs: number): Stored | undefined {
  if (periodEndMs !== chargedEndMs || !stored) return undefined;
  const count = storedCount(stored.value);
  return count > 0 ? { value: Math.max(count - hits, 0), expiresAtMs: stored.expiresAtMs } : undefined;
}
