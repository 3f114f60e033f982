// The limit arithmetic of lua/fixed_window.lua, lua/token_bucket.lua and lua/quota.lua, in the same
// order of floating-point operations, so the memory store answers exactly like Redis.

/** What one check decides; `after` is the level (count or tokens) if it is committed. */
export interface Decision {
  allowed: boolean;
  remaining: number;
  resetSeconds: number;
  retryAfterMs: number;
  after: number;
  periodEndMs: number;
}

// ---- fixed window: level = count used in the current window ----

export function windowEndMs(nowUs: number, win: number): number {
  return (Math.floor(nowUs / (win * 1_000_000)) * win + win) * 1000;
}

export function fixedWindowLevel(stored: { count: number; expiresAtMs: number } | undefined, win: number, nowUs: number): number {
  if (win <= 0 || !stored) return 0;
  // The key expires at its window's end: a count from another window is not this window's.
  if (stored.expiresAtMs !== windowEndMs(nowUs, win)) return 0;
  return stored.count;
}

export function fixedWindowDecide(count: number, cap: number, win: number, hits: number, nowUs: number): Decision {
  if (win <= 0) return refused(count, 0, 0, -1, 0);
  return countDecide(count, cap, hits, nowUs, windowEndMs(nowUs, win));
}

// ---- quota: level = count used in the period; the period end comes from the caller's calendar ----

export function quotaDecide(count: number, cap: number, hits: number, nowUs: number, periodEndMs: number): Decision {
  return countDecide(count, cap, hits, nowUs, periodEndMs);
}

/** Fixed window and quota: a count that resets at endMs. */
function countDecide(count: number, cap: number, hits: number, nowUs: number, endMs: number): Decision {
  const reset = Math.ceil((endMs * 1000 - nowUs) / 1_000_000);
  if (cap <= 0) return refused(count, 0, reset, -1, endMs);
  const need = Math.max(hits, 1);
  if (count + need <= cap) {
    return { allowed: true, remaining: Math.max(cap - count - hits, 0), resetSeconds: reset, retryAfterMs: -1, after: count + hits, periodEndMs: endMs };
  }
  const retry = hits > cap ? -1 : Math.max(Math.ceil((endMs * 1000 - nowUs) / 1000), 1);
  return refused(count, Math.max(cap - count, 0), reset, retry, endMs);
}

// ---- token bucket: level = tokens available now ----

export function tokenBucketLevel(stored: { tokens: number; lastUs: number } | undefined, cap: number, rate: number, nowUs: number): number {
  if (!stored) return cap;
  const elapsed = Math.max(nowUs - stored.lastUs, 0);
  return Math.min(cap, stored.tokens + (elapsed / 1_000_000) * rate);
}

export function tokenBucketDecide(tokens: number, cap: number, rate: number, hits: number): Decision {
  if (cap <= 0 || rate <= 0) return refused(tokens, 0, 0, -1, 0);
  const need = Math.max(hits, 1);
  let allowed = false;
  let after = tokens;
  let retry = -1;
  if (tokens >= need) {
    allowed = true;
    after = tokens - hits;
  } else if (hits <= cap) {
    retry = Math.max(Math.ceil(((need - tokens) / rate) * 1000 - 1e-6), 1);
  }
  const reset = Math.max(Math.ceil((cap - after) / rate - 1e-9), 0);
  return { allowed, remaining: Math.max(Math.floor(after), 0), resetSeconds: reset, retryAfterMs: retry, after, periodEndMs: 0 };
}

/** Key TTL: time to fill from empty, whole seconds. */
export function tokenBucketTtlSeconds(cap: number, rate: number): number {
  return Math.max(Math.ceil(cap / rate - 1e-9), 1);
}

function refused(level: number, remaining: number, reset: number, retry: number, periodEndMs: number): Decision {
  return { allowed: false, remaining, resetSeconds: reset, retryAfterMs: retry, after: level, periodEndMs };
}
