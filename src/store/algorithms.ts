// The limit arithmetic of lua/fixed_window.lua and lua/token_bucket.lua, in the same order of
// floating-point operations, so the memory store answers exactly like Redis.

/** What one check decides; `after` is the level (count or tokens) if it is committed. */
export interface Decision {
  allowed: boolean;
  remaining: number;
  resetSeconds: number;
  retryAfterSeconds: number;
  after: number;
}

// ---- fixed window: level = count used in the current window ----

export function windowEndMs(nowUs: number, win: number): number {
  return (Math.floor(nowUs / (win * 1_000_000)) * win + win) * 1000;
}

export function fixedWindowLevel(stored: { count: number; expiresAtMs: number } | undefined, win: number, nowUs: number): number {
  if (win <= 0 || !stored) return 0;
  // A count left from the previous window expires about one window before this window's end.
  if (stored.expiresAtMs <= windowEndMs(nowUs, win) - win * 500) return 0;
  return stored.count;
}

export function fixedWindowDecide(count: number, cap: number, win: number, hits: number, nowUs: number): Decision {
  if (win <= 0) return refused(count, 0, 0, -1);
  const endS = Math.floor(nowUs / (win * 1_000_000)) * win + win;
  const reset = Math.ceil((endS * 1_000_000 - nowUs) / 1_000_000);
  if (cap <= 0) return refused(count, 0, reset, -1);
  const need = Math.max(hits, 1);
  if (count + need <= cap) {
    return { allowed: true, remaining: Math.max(cap - count - hits, 0), resetSeconds: reset, retryAfterSeconds: -1, after: count + hits };
  }
  return refused(count, Math.max(cap - count, 0), reset, hits > cap ? -1 : Math.max(reset, 1));
}

// ---- token bucket: level = tokens available now ----

export function tokenBucketLevel(stored: { tokens: number; lastUs: number } | undefined, cap: number, rate: number, nowUs: number): number {
  if (!stored) return cap;
  const elapsed = Math.max(nowUs - stored.lastUs, 0);
  return Math.min(cap, stored.tokens + (elapsed / 1_000_000) * rate);
}

/** ceil that ignores floating-point noise: capacity / rate is often a hair above a whole number. */
function ceilSeconds(x: number): number {
  return Math.ceil(x - 1e-9);
}

export function tokenBucketDecide(tokens: number, cap: number, rate: number, hits: number): Decision {
  if (cap <= 0 || rate <= 0) return refused(tokens, 0, 0, -1);
  const need = Math.max(hits, 1);
  let allowed = false;
  let after = tokens;
  let retry = -1;
  if (tokens >= need) {
    allowed = true;
    after = tokens - hits;
  } else if (hits <= cap) {
    retry = Math.max(ceilSeconds((need - tokens) / rate), 1);
  }
  const reset = Math.max(ceilSeconds((cap - after) / rate), 0);
  return { allowed, remaining: Math.max(Math.floor(after), 0), resetSeconds: reset, retryAfterSeconds: retry, after };
}

/** Key TTL: time to fill from empty, whole seconds. */
export function tokenBucketTtlSeconds(cap: number, rate: number): number {
  return Math.max(ceilSeconds(cap / rate), 1);
}

function refused(level: number, remaining: number, reset: number, retry: number): Decision {
  return { allowed: false, remaining, resetSeconds: reset, retryAfterSeconds: retry, after: level };
}
