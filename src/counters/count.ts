// A count that resets at a known end: the decision fixed windows and quotas share (lua/count.lua).
import type { Stored, Verdict } from "./check.js";

export function countDecide(count: number, cap: number, hits: number, nowUs: number, endMs: number): Verdict<number> {
  const reset = Math.ceil((endMs * 1000 - nowUs) / 1_000_000);
  if (cap <= 0) return { allowed: false, remaining: 0, resetSeconds: reset, retryAfterMs: -1, after: count, periodEndMs: endMs };
  const need = Math.max(hits, 1);
  if (count + need <= cap) {
    return { allowed: true, remaining: Math.max(cap - count - hits, 0), resetSeconds: reset, retryAfterMs: -1, after: count + hits, periodEndMs: endMs };
  }
  const retry = hits > cap ? -1 : Math.max(Math.ceil((endMs * 1000 - nowUs) / 1000), 1);
  return { allowed: false, remaining: Math.max(cap - count, 0), resetSeconds: reset, retryAfterMs: retry, after: count, periodEndMs: endMs };
}

/** A count as Redis holds it: a decimal integer (lua: string.format('%d')). */
export function decodeCount(raw: Buffer, expiresAtMs: number): Stored | undefined {
  const n = Number(raw.toString("latin1"));
  return Number.isFinite(n) ? { value: n, expiresAtMs } : undefined;
}

/** A stored count, or 0 when the key holds something else. */
export function storedCount(value: unknown): number {
  return typeof value === "number" ? value : 0;
}
