// In-process store (single instance): the same math and all-or-nothing rule as lua/apply.lua,
// with Redis-like expiry and a bound on the number of keys.
import {
  fixedWindowDecide,
  fixedWindowLevel,
  tokenBucketDecide,
  tokenBucketLevel,
  tokenBucketTtlSeconds,
  windowEndMs,
  type Decision,
} from "./algorithms.js";
import { systemClock, type Clock } from "./clock.js";
import type { Check, CheckResult, Store, StoreStatus } from "./store.js";

type Entry =
  | { kind: "fixed_window"; count: number; expiresAtMs: number }
  | { kind: "token_bucket"; tokens: number; lastUs: number; expiresAtMs: number };

/** Entries examined per apply() by the incremental sweep of expired keys. */
const SWEEP_STEP = 8;

export class MemoryStore implements Store {
  readonly name = "memory";
  private readonly clock: Clock;
  private readonly maxKeys: number;
  /** Insertion order = least recently used first. */
  private readonly entries = new Map<string, Entry>();
  private sweeper: Iterator<[string, Entry]> | undefined;

  constructor(opts: { clock?: Clock; maxKeys?: number } = {}) {
    this.clock = opts.clock ?? systemClock;
    this.maxKeys = Math.max(1, opts.maxKeys ?? 1_000_000);
  }

  async start(): Promise<void> {}

  status(): StoreStatus {
    return { kind: "memory", nodes: [{ id: "memory", state: "up" }] };
  }

  async close(): Promise<void> {
    this.entries.clear();
  }

  async apply(checks: Check[]): Promise<CheckResult[]> {
    // Synchronous from here to the end: no other apply() can interleave.
    const nowUs = this.clock.nowMicros();
    const nowMs = Math.floor(nowUs / 1000);
    this.sweep(nowMs);
    const results: CheckResult[] = new Array(checks.length);
    const pending = new Map<string, { check: Check; level: number }>();
    const stored = new Map<string, number>();
    let blocked = false;
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i];
      let base = stored.get(c.key);
      if (base === undefined) {
        base = this.level(c, nowUs, nowMs);
        stored.set(c.key, base);
      }
      const level = pending.get(c.key)?.level ?? base;
      const d = decide(c, level, nowUs);
      results[i] = {
        allowed: d.allowed,
        remaining: d.remaining,
        resetSeconds: d.resetSeconds,
        retryAfterSeconds: d.retryAfterSeconds,
      };
      if (d.allowed) {
        if (c.hits > 0) pending.set(c.key, { check: c, level: d.after });
      } else if (!c.shadow) {
        blocked = true;
      }
    }
    if (!blocked) {
      for (const [key, p] of pending) this.save(key, p.check, p.level, nowUs, nowMs);
      this.evict();
      return results;
    }
    // Refused: nothing was consumed, so the allowed checks report what is still there.
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i];
      if (!results[i].allowed || c.hits === 0) continue;
      const d = decide({ ...c, hits: 0 }, stored.get(c.key)!, nowUs);
      results[i].remaining = d.remaining;
      results[i].resetSeconds = d.resetSeconds;
    }
    return results;
  }

  /** Redis PTTL semantics (-2 = no such key); for tests. */
  pttl(key: string): number {
    const nowMs = Math.floor(this.clock.nowMicros() / 1000);
    const e = this.entries.get(key);
    return e && nowMs <= e.expiresAtMs ? e.expiresAtMs - nowMs : -2;
  }

  /** Live keys; for tests. */
  keys(): string[] {
    const nowMs = Math.floor(this.clock.nowMicros() / 1000);
    return [...this.entries].filter(([, e]) => nowMs <= e.expiresAtMs).map(([k]) => k);
  }

  get size(): number {
    return this.entries.size;
  }

  private level(c: Check, nowUs: number, nowMs: number): number {
    let e = this.entries.get(c.key);
    if (e && nowMs > e.expiresAtMs) {
      // Redis: a key is gone once its expiry time has passed.
      this.entries.delete(c.key);
      e = undefined;
    } else if (e) {
      // Touch: a refused (hot) key is in use too, and evicting it would hand out a fresh limit.
      this.entries.delete(c.key);
      this.entries.set(c.key, e);
    }
    if (e && e.kind !== c.algorithm) e = undefined;
    if (c.algorithm === "fixed_window") {
      return fixedWindowLevel(e as Extract<Entry, { kind: "fixed_window" }> | undefined, c.windowSeconds, nowUs);
    }
    return tokenBucketLevel(e as Extract<Entry, { kind: "token_bucket" }> | undefined, c.capacity, c.refillPerSecond, nowUs);
  }

  private save(key: string, c: Check, level: number, nowUs: number, nowMs: number): void {
    const e: Entry =
      c.algorithm === "fixed_window"
        ? { kind: "fixed_window", count: level, expiresAtMs: windowEndMs(nowUs, c.windowSeconds) }
        : {
            kind: "token_bucket",
            tokens: level,
            lastUs: nowUs,
            expiresAtMs: nowMs + tokenBucketTtlSeconds(c.capacity, c.refillPerSecond) * 1000,
          };
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

function decide(c: Check, level: number, nowUs: number): Decision {
  return c.algorithm === "fixed_window"
    ? fixedWindowDecide(level, c.capacity, c.windowSeconds, c.hits, nowUs)
    : tokenBucketDecide(level, c.capacity, c.refillPerSecond, c.hits);
}
