// Sliding window counter maths, step for step as lua/sliding_window.lua. Two epoch-aligned windows are
// kept: the current one's count and the previous one's. The previous count is weighted by the part of
// it still inside a window-long span ending now; a request passes while that estimate plus its cost
// stays within the limit. A fixed window admits up to twice the limit across a boundary; this admits
// the limit, plus rounding.
import type { Stored, Verdict } from "../check.js";

/** Counts as seen at the store's time: the current window's and the previous window's. */
export interface SlidingLevel {
  cur: number;
  prev: number;
}

/** What the key holds: the window index of `cur`, and the two counts (Redis: "index:cur:prev"). */
interface SlidingState extends SlidingLevel {
  index: number;
}

const EMPTY: SlidingLevel = { cur: 0, prev: 0 };

function isState(v: unknown): v is SlidingState {
  return typeof v === "object" && v !== null && "index" in v && "cur" in v && "prev" in v;
}

/** The key's value as Redis holds it: "index:cur:prev". */
export function decodeSliding(raw: Buffer, expiresAtMs: number): Stored | undefined {
  const m = /^(\d+):(\d+):(\d+)$/.exec(raw.toString("latin1"));
  if (!m) return undefined;
  return { value: { index: Number(m[1]), cur: Number(m[2]), prev: Number(m[3]) } satisfies SlidingState, expiresAtMs };
}

function windowIndex(nowUs: number, win: number): number {
  return Math.floor(nowUs / (win * 1_000_000));
}

/** The counts rolled to the window that holds nowUs. */
export function slidingLevel(stored: Stored | undefined, win: number, nowUs: number): SlidingLevel {
  if (win <= 0 || !stored || !isState(stored.value)) return EMPTY;
  const s = stored.value;
  const index = windowIndex(nowUs, win);
  // A store clock that stepped back a little keeps the counts it has.
  if (s.index >= index) return { cur: s.cur, prev: s.prev };
  if (s.index === index - 1) return { cur: 0, prev: s.cur };
  return EMPTY;
}

export function slidingDecide(level: SlidingLevel, cap: number, win: number, hits: number, nowUs: number): Verdict<SlidingLevel> {
  if (win <= 0) return { allowed: false, remaining: 0, resetSeconds: 0, retryAfterMs: -1, after: level, periodEndMs: 0 };
  const winUs = win * 1_000_000;
  const startUs = windowIndex(nowUs, win) * winUs;
  const elapsed = nowUs - startUs;
  const endMs = (startUs + winUs) / 1000;
  const estimate = level.prev * ((winUs - elapsed) / winUs) + level.cur;
  const need = Math.max(hits, 1);
  if (cap > 0 && estimate + need <= cap) {
    const after = { cur: level.cur + hits, prev: level.prev };
    return {
      allowed: true,
      remaining: Math.max(Math.floor(cap - estimate - hits), 0),
      resetSeconds: resetSeconds(after, winUs, elapsed),
      retryAfterMs: -1,
      after,
      periodEndMs: endMs,
    };
  }
  let retry = -1;
  if (cap > 0 && hits <= cap) {
    let waitUs: number;
    if (level.cur + need <= cap) {
      // This window's count fits: wait until enough of the previous window has slid out.
      waitUs = winUs * (1 - (cap - need - level.cur) / level.prev) - elapsed;
    } else {
      // Only after this window becomes the previous one, and enough of it has slid out.
      waitUs = winUs - elapsed + winUs * (1 - (cap - need) / level.cur);
    }
    retry = Math.max(Math.ceil(waitUs / 1000), 1);
  }
  const remaining = Math.max(Math.floor(cap - estimate), 0);
  return { allowed: false, remaining, resetSeconds: resetSeconds(level, winUs, elapsed), retryAfterMs: retry, after: level, periodEndMs: endMs };
}

/** Until both counts have slid out: the end of the next window if this one counted, else of this one. */
function resetSeconds(l: SlidingLevel, winUs: number, elapsed: number): number {
  if (l.cur > 0) return Math.ceil((2 * winUs - elapsed) / 1_000_000);
  if (l.prev > 0) return Math.ceil((winUs - elapsed) / 1_000_000);
  return 0;
}

/** Kept for two windows: while `cur` is this window's or the previous one's. */
export function slidingSave(level: SlidingLevel, win: number, nowUs: number): Stored {
  const index = windowIndex(nowUs, win);
  return { value: { index, cur: level.cur, prev: level.prev } satisfies SlidingState, expiresAtMs: (index + 2) * win * 1000 };
}

/**
 * Gives back hits charged in the window ending at chargedEndMs: from `cur` while that window is the
 * stored one, from `prev` once it has become the previous one. The key keeps its expiry.
 */
export function slidingRefund(stored: Stored | undefined, win: number, hits: number, chargedEndMs: number): Stored | undefined {
  if (!stored || !isState(stored.value)) return undefined;
  const s = stored.value;
  const charged = chargedEndMs / (win * 1000) - 1;
  let next: SlidingState;
  if (s.index === charged) next = { index: s.index, cur: Math.max(s.cur - hits, 0), prev: s.prev };
  else if (s.index === charged + 1) next = { index: s.index, cur: s.cur, prev: Math.max(s.prev - hits, 0) };
  else return undefined;
  return { value: next, expiresAtMs: stored.expiresAtMs };
}
