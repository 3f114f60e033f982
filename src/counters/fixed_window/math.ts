// Fixed window maths, step for step as lua/fixed_window.lua: a count per epoch-aligned window, in its
// parity's key (even windows the key, odd ones core/keys.ts oddWindowKey), which expires at the window end.
import { oddWindowKey } from "../../core/keys.js";
import type { Bound, Stored, Verdict } from "../check.js";
import { countDecide, storedCount } from "../count.js";

export function windowEndMs(nowUs: number, win: number): number {
  return (Math.floor(nowUs / (win * 1_000_000)) * win + win) * 1000;
}

/** The key of the window nowMs is in. The bound's periodEndMs stays 0: a window's end comes from the time. */
export function fixedWindowBind(key: string, win: number, nowMs: number): Bound {
  if (win <= 0 || Math.floor(nowMs / (win * 1000)) % 2 === 0) return { key, periodEndMs: 0 };
  return { key: oddWindowKey(key), periodEndMs: 0 };
}

/**
 * Count already used in the current window. A count from another window (a keyspace on another clock
 * than the decision's: lua/fixed_window.lua checks it only for a pinned time) is not this one's.
 */
export function fixedWindowLevel(stored: Stored | undefined, win: number, nowUs: number): number {
  if (win <= 0 || !stored) return 0;
  if (stored.expiresAtMs !== windowEndMs(nowUs, win)) return 0;
  return storedCount(stored.value);
}

export function fixedWindowDecide(count: number, cap: number, win: number, hits: number, nowUs: number): Verdict<number> {
  if (win <= 0) return { allowed: false, remaining: 0, resetSeconds: 0, retryAfterMs: -1, after: count, periodEndMs: 0 };
  return countDecide(count, cap, hits, nowUs, windowEndMs(nowUs, win));
}

export function fixedWindowSave(count: number, win: number, nowUs: number): Stored {
  return { value: count, expiresAtMs: windowEndMs(nowUs, win) };
}

/** Only while the charged window (chargedEndMs = its end) is still the current one. */
export function fixedWindowRefund(stored: Stored | undefined, win: number, hits: number, chargedEndMs: number, nowUs: number): Stored | undefined {
  if (windowEndMs(nowUs, win) !== chargedEndMs) return undefined;
  const count = fixedWindowLevel(stored, win, nowUs);
  return count > 0 ? fixedWindowSave(Math.max(count - hits, 0), win, nowUs) : undefined;
}
