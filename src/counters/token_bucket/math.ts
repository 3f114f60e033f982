// Token bucket maths, step for step as lua/token_bucket.lua (the case study's script, with a cost and
// a fractional refill). The epsilons: capacity / rate is often a hair above a whole number.
import type { Stored, Verdict } from "../check.js";

/** What a bucket key holds: tokens and the time they were counted (Redis: struct 'dd'). */
export interface Bucket {
  tokens: number;
  lastUs: number;
}

function isBucket(v: unknown): v is Bucket {
  return typeof v === "object" && v !== null && "tokens" in v && "lastUs" in v;
}

/** A bucket as Redis holds it: struct 'dd' (tokens, last), 16 bytes, native order (little-endian here). */
export function decodeBucket(raw: Buffer, expiresAtMs: number): Stored | undefined {
  if (raw.length !== 16) return undefined;
  return { value: { tokens: raw.readDoubleLE(0), lastUs: raw.readDoubleLE(8) } satisfies Bucket, expiresAtMs };
}

/** Tokens available now. */
export function tokenBucketLevel(stored: Stored | undefined, cap: number, rate: number, nowUs: number): number {
  if (!stored || !isBucket(stored.value)) return cap;
  const b = stored.value;
  const elapsed = Math.max(nowUs - b.lastUs, 0);
  return Math.min(cap, b.tokens + (elapsed / 1_000_000) * rate);
}

export function tokenBucketDecide(tokens: number, cap: number, rate: number, hits: number): Verdict<number> {
  if (cap <= 0 || rate <= 0) return { allowed: false, remaining: 0, resetSeconds: 0, retryAfterMs: -1, after: tokens, periodEndMs: 0 };
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

/** Expires after the time to fill from empty (never below empty: leases take only tokens that are there): an idle bucket older than that is full. */
export function tokenBucketSave(tokens: number, cap: number, rate: number, nowUs: number): Stored {
  const ttlSeconds = Math.max(Math.ceil(Math.max(cap, cap - tokens) / rate - 1e-9), 1);
  return { value: { tokens, lastUs: nowUs } satisfies Bucket, expiresAtMs: Math.floor(nowUs / 1000) + ttlSeconds * 1000 };
}

export function tokenBucketRefund(stored: Stored | undefined, cap: number, rate: number, hits: number, nowUs: number): Stored {
  const tokens = tokenBucketLevel(stored, cap, rate, nowUs);
  return tokenBucketSave(Math.min(cap, tokens + hits), cap, rate, nowUs);
}
