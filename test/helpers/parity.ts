// Parity of an algorithm's Lua (on a real redis-server, time pinned into the script) and its
// TypeScript (the memory store's engine): the same steps, at the same times, must give the same
// answers, field for field. Used by src/counters/<name>/parity.test.ts.
import { pino } from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Check, CheckResult } from "../../src/store/store.js";
import { MemoryStore } from "../../src/store/memory.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { ManualClock } from "./manual-clock.js";
import { startRedis, type RedisProcess } from "./redis-server.js";

/** One store call, after moving both clocks forward. */
export interface ParityStep {
  advanceMs: number;
  checks: Check[];
  dryRun?: boolean;
  /** Give back what this call consumed, right after it (as the limiter does when another node refused). */
  refund?: boolean;
}

/** A small seeded PRNG (mulberry32): a failing sequence can be replayed from its seed. */
export function rng(seed: number): { int(min: number, max: number): number; pick<T>(xs: readonly T[]): T; chance(p: number): boolean } {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: (xs) => xs[Math.floor(next() * xs.length)],
    chance: (p) => next() < p,
  };
}

type Outcome = { results: CheckResult[] } | { error: true };

async function run(store: MemoryStore | RedisStore, step: ParityStep): Promise<Outcome> {
  try {
    const results = await store.apply(0, step.checks, step.dryRun ?? false);
    if (step.refund) await store.refund(0, step.checks, results);
    return { results };
  } catch {
    return { error: true };
  }
}

/**
 * Runs `sequences` sequences from `makeSteps(seed, startMs)` through both stores and expects equal
 * outcomes at every step. Each sequence starts a little ahead of the real time (keys written with
 * PXAT must not be expired by Redis's own clock) and only moves forward.
 */
export function runParity(
  makeSteps: (seed: number, startMs: number) => ParityStep[],
  sequences: number,
  /** start: where a sequence starts (ms), at or after realMs; default a second after the real time. */
  opts: { errors?: boolean; start?: (seed: number, realMs: number) => number } = {},
): void {
  let redis: RedisProcess;
  let redisStore: RedisStore;
  const redisClock = new ManualClock();
  const memoryClock = new ManualClock();
  const memory = new MemoryStore({ clock: memoryClock });

  beforeAll(async () => {
    redis = await startRedis();
    redisStore = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 5000, logger: pino({ level: "silent" }), clock: redisClock });
    await redisStore.start();
  });
  afterAll(async () => {
    await redisStore?.close();
    await redis?.stop();
  });

  it(`gives the same answers in Lua on Redis and in TypeScript, ${sequences} random sequences`, async () => {
    // The vectors must reach every kind of answer, or agreeing proves little.
    const seen = { allowed: 0, refused: 0, retryNever: 0, error: 0 };
    for (let seed = 1; seed <= sequences; seed++) {
      const startUs = (opts.start ? opts.start(seed, Date.now() + 1000) : Date.now() + 1000) * 1000 + (seed % 997);
      redisClock.set(startUs);
      memoryClock.set(startUs);
      const steps = makeSteps(seed, Math.floor(startUs / 1000));
      for (let i = 0; i < steps.length; i++) {
        redisClock.advance(steps[i].advanceMs);
        memoryClock.advance(steps[i].advanceMs);
        const fromLua = await run(redisStore, steps[i]);
        const fromTs = await run(memory, steps[i]);
        expect(fromTs, `seed ${seed}, step ${i}: ${JSON.stringify(steps[i])}`).toEqual(fromLua);
        if ("error" in fromLua) seen.error++;
        else
          for (const res of fromLua.results) {
            if (res.allowed) seen.allowed++;
            else if (res.retryAfterMs === -1) seen.retryNever++;
            else seen.refused++;
          }
      }
    }
    expect(seen.allowed).toBeGreaterThan(sequences);
    expect(seen.refused).toBeGreaterThan(sequences / 10);
    expect(seen.retryNever).toBeGreaterThan(0);
    if (opts.errors) expect(seen.error).toBeGreaterThan(0);
  });
}
