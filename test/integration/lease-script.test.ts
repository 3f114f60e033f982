// lua/lease.lua on a real redis-server, per algorithm: a take is "up to want, at least need" by the
// algorithm's own check (never past the limit), a refusal reports the store's figures, and a give-back is
// the algorithm's own refund: a window's count goes down (never below 0, only in the window charged), a
// bucket gets its tokens back up to its capacity.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FixedWindowCheck } from "../../src/counters/fixed_window/index.js";
import type { SlidingWindowCheck } from "../../src/counters/sliding_window/index.js";
import type { TokenBucketCheck } from "../../src/counters/token_bucket/index.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import type { Check, LeaseEntry } from "../../src/store/store.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { windowKeyOfEnd } from "../helpers/window-key.js";

let redis: RedisProcess;
let store: RedisStore;
const clock = new ManualClock();
beforeAll(async () => {
  redis = await startRedis();
  // A pinned clock (sent into the script): window boundaries are the test's, not the wall's.
  clock.set(Math.ceil(Date.now() / 60_000) * 60_000 * 1000 + 1_000_000);
  store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 2000, logger: pino({ level: "silent" }), clock });
  await store.start();
});
afterAll(async () => {
  await store?.close();
  await redis?.stop();
});

const take = (check: Check, want: number, need = 1): LeaseEntry => ({ check, want, need, back: 0, backEndMs: 0 });
const back = (check: Check, units: number, endMs: number): LeaseEntry => ({ check, want: 0, need: 1, back: units, backEndMs: endMs });
const one = async (e: LeaseEntry) => (await store.lease(0, [e])).results[0];

describe("lease.lua", () => {
  it("fixed window: takes up to what fits, then refuses with the window's Retry-After; a give-back lowers the count", async () => {
    const c: FixedWindowCheck = { key: "sluice:{l:fw}:fw60", algorithm: "fixed_window", capacity: 10, windowSeconds: 60, hits: 1, shadow: false };
    const a = await one(take(c, 4));
    expect(a.taken).toBe(4);
    expect(a.probe).toEqual(expect.objectContaining({ allowed: true, remaining: 5 }));
    const end = a.probe.periodEndMs;
    expect(await one(take(c, 100))).toEqual(expect.objectContaining({ taken: 6 }));
    const refused = await one(take(c, 3, 2));
    expect(refused.taken).toBe(0);
    expect(refused.probe).toEqual(expect.objectContaining({ allowed: false, remaining: 0, retryAfterMs: 59_000, periodEndMs: end }));
    const key = windowKeyOfEnd(c.key, 60, end);
    expect(await redis.cli("GET", key)).toBe("10\n");
    // Give back 3 (charged in this window), then 50: the count never goes below 0.
    expect((await one(back(c, 3, end))).probe.remaining).toBe(2);
    expect(await redis.cli("GET", key)).toBe("7\n");
    await one(back(c, 50, end));
    expect(await redis.cli("GET", key)).toBe("0\n");
    // Units of a window that is over are not given back to the next one.
    await one(take(c, 5));
    clock.advance(60_000);
    const next = await one(take(c, 2));
    expect(next.taken).toBe(2);
    await one(back(c, 5, end));
    expect(await redis.cli("GET", windowKeyOfEnd(c.key, 60, next.probe.periodEndMs))).toBe("2\n");
  });

  it("token bucket: takes whole tokens that are there; given-back tokens stop at the capacity", async () => {
    const c: TokenBucketCheck = { key: "sluice:{l:tb}:tb", algorithm: "token_bucket", capacity: 10, refillPerSecond: 1, hits: 1, shadow: false };
    expect((await one(take(c, 7))).taken).toBe(7);
    const r = await one(take(c, 7, 5));
    expect(r.taken).toBe(0);
    expect(r.probe).toEqual(expect.objectContaining({ allowed: false, remaining: 3, retryAfterMs: 2000 }));
    clock.advance(500); // 3.5 tokens
    expect((await one(take(c, 7))).taken).toBe(3);
    // 0.5 left: give back 20, the bucket holds 10, no more (the probe reports what one more would leave).
    const b = await one(back(c, 20, 0));
    expect(b.probe.remaining).toBe(9);
    expect((await one(take(c, 20))).taken).toBe(10);
  });

  it("sliding window: takes what the estimate leaves; a give-back lowers the window it was charged in, never below 0", async () => {
    const c: SlidingWindowCheck = { key: "sluice:{l:sw}:sw60", algorithm: "sliding_window", capacity: 10, windowSeconds: 60, hits: 1, shadow: false };
    const a = await one(take(c, 8));
    expect(a.taken).toBe(8);
    const end = a.probe.periodEndMs;
    // Next window, a quarter in: the previous 8 weigh 6, so 4 fit.
    clock.advance(end - clock.nowMicros() / 1000 + 15_000);
    expect((await one(take(c, 9))).taken).toBe(4);
    expect((await redis.cli("GET", c.key)).trim().split(":").slice(1)).toEqual(["4", "8"]);
    // Give back 20 charged in the previous window: its count goes to 0, this window's stays.
    await one(back(c, 20, end));
    expect((await redis.cli("GET", c.key)).trim().split(":").slice(1)).toEqual(["4", "0"]);
  });
});
