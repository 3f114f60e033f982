// The reference's fixed window maths, step for step as lua/reference_fixed_window.lua: the window start
// ends the key, the count is raised by refused requests too, and the key lives a unit from its last raise.
import type { Bound, Stored, Verdict } from "../check.js";
import { storedCount } from "../count.js";

/** The key for the store's time: the reference's key without its window start, then that start (unix seconds). */
export function referenceWindowBind(keyBase: string, win: number, nowMs: number): Bound {
  return { key: keyBase + String(Math.floor(nowMs / (win * 1000)) * win), periodEndMs: 0 };
}

function endMs(win: number, nowUs: number): number {
  return (Math.floor(nowUs / (win * 1_000_000)) * win + win) * 1000;
}

export function referenceWindowLevel(stored: Stored | undefined): number {
  return stored ? storedCount(stored.value) : 0;
}

export function referenceWindowDecide(count: number, cap: number, win: number, hits: number, nowUs: number): Verdict<number> {
  const e = endMs(win, nowUs);
  const reset = Math.ceil((e * 1000 - nowUs) / 1_000_000);
  const after = count + hits;
  if (after <= cap) return { allowed: true, remaining: cap - after, resetSeconds: reset, retryAfterMs: -1, after, periodEndMs: e };
  const retry = hits > cap ? -1 : Math.max(Math.ceil((e * 1000 - nowUs) / 1000), 1);
  return { allowed: false, remaining: 0, resetSeconds: reset, retryAfterMs: retry, after, periodEndMs: e };
}

/** SET … EX win: the reference's EXPIRE at every raise. */
export function referenceWindowSave(count: number, win: number, nowUs: number): Stored {
  return { value: count, expiresAtMs: Math.floor(nowUs / 1000) + win * 1000 };
}
