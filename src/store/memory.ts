// In-process store (single instance): the same math and all-or-nothing rule as lua/apply.lua,
// with Redis-like expiry and a bound on the number of keys.
import {
  fixedWindowDecide,
  fixedWindowLevel,
  quotaDecide,
  tokenBucketDecide,
  tokenBucketLevel,
  tokenBucketTtlSeconds,
  windowEndMs,
  type Decision,
} from "./algorithms.js";
import { systemClock, type Clock } from "./clock.js";
import type { Check, CheckResult, Store, StoreStatus } from "./store.js";

type Entry =
  | { kind: "count"; count: number; expiresAtMs: number }
  | { kind: "bucket"; tokens: number; lastUs: number; expiresAtMs: number };

/** A check resolved against this store's clock: the key it uses and, for a quota, its period end. */
interface Resolved {
  check: Check;
  key: string;
  periodEndMs: number;
}

/** Keys held at most, unless configured (SLUICE_MEMORY_MAX_KEYS); the least recently used goes first. */
export const DEFAULT_MEMORY_MAX_KEYS = 1_000_000;

/** Entries examined per apply() by the incremental sweep of expired keys. */
const SWEEP_STEP = 8;

export class MemoryStore implements Store {
  readonly name = "memory";
  protected readonly clock: Clock;
  private readonly maxKeys: number;
  /** Insertion order = least recently used first. Protected for the tests' inspecting subclass. */
  protected readonly entries = new Map<string, Entry>();
  private sweeper: Iterator<[string, Entry]> | undefined;

  constructor(opts: { clock?: Clock; maxKeys?: number } = {}) {
    this.clock = opts.clock ?? systemClock;
    this.maxKeys = Math.max(1, opts.maxKeys ?? DEFAULT_MEMORY_MAX_KEYS);
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.entries.clear();
  }

  status(): StoreStatus {
    return { kind: "memory", nodes: [{ id: "memory", state: "up", inFlight: 0 }] };
  }

  groupOf(): number {
    return 0;
  }

  async apply(_group: number, checks: Check[], dryRun = false): Promise<CheckResult[]> {
    return this.applyNow(checks, dryRun);
  }

  /** apply() without the promise: synchronous from start to end, so no other call can interleave. */
  applyNow(checks: Check[], dryRun = false): CheckResult[] {
    const nowUs = this.clock.nowMicros();
    const nowMs = Math.floor(nowUs / 1000);
    this.sweep(nowMs);
    const n = checks.length;
    const resolved = new Array<Resolved>(n);
    for (let i = 0; i < n; i++) resolved[i] = resolve(checks[i], nowMs);
    const results: CheckResult[] = new Array(n);
    const pending = new Map<string, { r: Resolved; level: number }>();
    const stored = new Map<string, number>();
    let blocked = dryRun;
    for (let i = 0; i < n; i++) {
      const r = resolved[i];
      const c = r.check;
      let base = stored.get(r.key);
      if (base === undefined) {
        base = this.level(r, nowUs, nowMs);
        stored.set(r.key, base);
      }
      const level = pending.get(r.key)?.level ?? base;
      const d = decide(r, level, c.hits, nowUs);
      results[i] = toResult(d);
      if (d.allowed) {
        if (c.hits > 0) pending.set(r.key, { r, level: d.after });
      } else if (!c.shadow) {
        blocked = true;
      }
    }
    if (!blocked) {
      for (const [key, p] of pending) this.save(key, p.r, p.level, nowUs, nowMs);
      this.evict();
      return results;
    }
    // Refused: nothing was consumed, so the allowed checks report what is still there.
    for (let i = 0; i < n; i++) {
      if (!results[i].allowed || checks[i].hits === 0) continue;
      const d = decide(resolved[i], stored.get(resolved[i].key)!, 0, nowUs);
      results[i].remaining = d.remaining;
      results[i].resetSeconds = d.resetSeconds;
    }
    return results;
  }

  async refund(_group: number, checks: Check[], results: CheckResult[]): Promise<void> {
    this.refundNow(checks, results);
  }

  refundNow(checks: Check[], results: CheckResult[]): void {
    const nowUs = this.clock.nowMicros();
    const nowMs = Math.floor(nowUs / 1000);
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i];
      if (c.hits <= 0) continue;
      const r = resolve(c, nowMs);
      const charged = results[i].periodEndMs;
      if (c.algorithm === "token_bucket") {
        const tokens = this.level(r, nowUs, nowMs);
        this.save(r.key, r, Math.min(c.capacity, tokens + c.hits), nowUs, nowMs);
        continue;
      }
      const end = c.algorithm === "quota" ? r.periodEndMs : windowEndMs(nowUs, c.windowSeconds);
      if (end !== charged) continue; // the charged window or period is over
      const count = this.level(r, nowUs, nowMs);
      if (count > 0) this.save(r.key, r, Math.max(count - c.hits, 0), nowUs, nowMs);
    }
  }

  private level(r: Resolved, nowUs: number, nowMs: number): number {
    const c = r.check;
    let e = this.entries.get(r.key);
    if (e && nowMs > e.expiresAtMs) {
      // Redis: a key is gone once its expiry time has passed.
      this.entries.delete(r.key);
      e = undefined;
    } else if (e) {
      // Touch: a refused (hot) key is in use too, and evicting it would hand out a fresh limit.
      this.entries.delete(r.key);
      this.entries.set(r.key, e);
    }
    if (c.algorithm === "token_bucket") {
      return tokenBucketLevel(e?.kind === "bucket" ? e : undefined, c.capacity, c.refillPerSecond, nowUs);
    }
    const counted = e?.kind === "count" ? e : undefined;
    return c.algorithm === "fixed_window" ? fixedWindowLevel(counted, c.windowSeconds, nowUs) : counted?.count ?? 0;
  }

  private save(key: string, r: Resolved, level: number, nowUs: number, nowMs: number): void {
    const c = r.check;
    const e: Entry =
      c.algorithm === "token_bucket"
        ? { kind: "bucket", tokens: level, lastUs: nowUs, expiresAtMs: nowMs + tokenBucketTtlSeconds(c.capacity, c.refillPerSecond) * 1000 }
        : { kind: "count", count: level, expiresAtMs: c.algorithm === "quota" ? r.periodEndMs : windowEndMs(nowUs, c.windowSeconds) };
    this.entries.delete(key); // re-insert: most recently used goes last
    this.entries.set(key, e);
  }

  private evict(): void {
    while (this.entries.size > this.maxKeys) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  /** Removes expired entries a few at a time, resuming where the previous call stopped. */
  private sweep(nowMs: number): void {
    this.sweeper ??= this.entries.entries();
    for (let i = 0; i < SWEEP_STEP; i++) {
      const next = this.sweeper.next();
      if (next.done) {
        this.sweeper = undefined;
        return;
      }
      const [key, e] = next.value;
      if (nowMs > e.expiresAtMs) this.entries.delete(key);
    }
  }
}

/** The key a check uses now: a quota picks the period that holds this store's time (as lua/checks.lua). */
function resolve(c: Check, nowMs: number): Resolved {
  const p = c.periods;
  if (!p) return { check: c, key: c.key, periodEndMs: 0 };
  if (nowMs < p.startMs || nowMs >= p.endMs) {
    throw new Error("sluice: store clock outside the quota periods sent (clock skew of half a period?)");
  }
  return nowMs < p.boundaryMs ? { check: c, key: c.key, periodEndMs: p.boundaryMs } : { check: c, key: p.nextKey, periodEndMs: p.endMs };
}

function decide(r: Resolved, level: number, hits: number, nowUs: number): Decision {
  const c = r.check;
  if (c.algorithm === "fixed_window") return fixedWindowDecide(level, c.capacity, c.windowSeconds, hits, nowUs);
  if (c.algorithm === "quota") return quotaDecide(level, c.capacity, hits, nowUs, r.periodEndMs);
  return tokenBucketDecide(level, c.capacity, c.refillPerSecond, hits);
}

function toResult(d: Decision): CheckResult {
  return { allowed: d.allowed, remaining: d.remaining, resetSeconds: d.resetSeconds, retryAfterMs: d.retryAfterMs, periodEndMs: d.periodEndMs };
}
