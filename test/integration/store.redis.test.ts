// RedisStore against a real redis-server: the Store contract in real time, plus failure handling.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { pino } from "pino";
import { MemoryStore } from "../../src/store/memory.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { StoreUnavailableError } from "../../src/store/store.js";
import { fw, runStoreContract, tb } from "../contract/store.contract.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { sleep, until } from "../helpers/wait.js";
import { windowKey, windowKeyOfEnd, windowKeys } from "../helpers/window-key.js";

const silent = pino({ level: "silent" });
let redis: RedisProcess;
/** Reads for the contract's checks: one round trip each, not a redis-cli process (keys with 1 s TTLs are read). */
let reader: Redis;
beforeAll(async () => {
  redis = await startRedis();
  reader = new Redis({ host: "127.0.0.1", port: redis.port, lazyConnect: true });
  await reader.connect();
});
afterAll(async () => {
  reader?.disconnect();
  await redis?.stop();
});

runStoreContract("redis", async () => {
  await redis.cli("FLUSHALL");
  // Generous timeout: exactness under concurrent bursts on a loaded 2-core box (NOTES.md).
  const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 5000, logger: silent });
  await store.start();
  return {
    store,
    // A few ms extra: Node timers and Redis TIME are different clocks.
    advance: async (ms) => {
      await sleep(ms + 5);
    },
    cleanup: () => store.close(),
    nowMicros: async () => {
      const [s, us] = (await redis.cli("TIME")).trim().split("\n").map(Number);
      return s * 1_000_000 + us;
    },
    keys: () => reader.keys("*"),
    pttl: (key) => reader.pttl(key),
  };
});

/** A logger that records what it logs. */
function recorder() {
  const lines: { msg: string }[] = [];
  const logger = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { logger, lines, count: (msg: string) => lines.filter((l) => l.msg === msg).length };
}

async function expectUnavailableFast(store: RedisStore) {
  const started = performance.now();
  const err = await store.apply(0, [fw("down", 5)]).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(performance.now() - started).toBeLessThan(100);
  expect(err).toBeInstanceOf(StoreUnavailableError);
  expect((err as Error).message).toMatch(/^Redis 127\.0\.0\.1:\d+ is unreachable \(/);
}

/** The store's first answer once Redis is back, within ms. */
async function answerWhenBack(store: RedisStore, ms: number) {
  let r: Awaited<ReturnType<RedisStore["apply"]>> | undefined;
  await until(async () => (r = await store.apply(0, [tb("back", 5, 1)]).catch(() => undefined)) !== undefined, ms, "the store to come back", 50);
  return r!;
}

describe("RedisStore failures", () => {
  it("Redis killed: apply rejects with StoreUnavailableError within 100 ms; works again after restart", async () => {
    const own = await startRedis();
    const rec = recorder();
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on("unhandledRejection", onUnhandled);
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: own.port }], timeoutMs: 50, logger: rec.logger });
    try {
      await store.start();
      expect((await store.apply(0, [fw("x", 5)]))[0].remaining).toBe(4);
      own.kill("SIGKILL");
      await new Promise((r) => own.proc.once("exit", r));
      for (let i = 0; i < 5; i++) await expectUnavailableFast(store);
      await Promise.all(Array.from({ length: 20 }, () => expectUnavailableFast(store)));
      await sleep(300); // a few failed reconnect attempts
      await own.restart();
      const started = Date.now();
      expect((await answerWhenBack(store, 3000))[0]).toEqual({
        allowed: true,
        remaining: 4,
        resetSeconds: 1,
        retryAfterMs: -1,
        periodEndMs: expect.any(Number),
      });
      expect(Date.now() - started).toBeLessThan(2500);
      await sleep(50);
      expect(unhandled).toEqual([]);
      // State changes are logged once each, not per failed call or reconnect attempt.
      expect(rec.count("rate-limit store up")).toBe(2);
      expect(rec.count("rate-limit store down")).toBe(1);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      await store.close();
      await own.stop();
    }
  });

  it("Redis down at start: start() resolves, apply fails fast, and recovers when Redis comes up", async () => {
    const own = await startRedis();
    await own.stop();
    const rec = recorder();
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: own.port }], timeoutMs: 50, logger: rec.logger });
    try {
      const started = performance.now();
      await store.start();
      expect(performance.now() - started).toBeLessThan(2000);
      expect(rec.count("rate-limit store down")).toBe(1);
      await expectUnavailableFast(store);
      await own.restart();
      await answerWhenBack(store, 3000);
      expect(rec.count("rate-limit store up")).toBe(1);
    } finally {
      await store.close();
      await own.stop();
    }
  });

  it("a script error (wrong key type) is StoreUnavailableError too", async () => {
    await redis.cli("SET", "wrongtype", "x");
    for (const k of windowKeys("wrongtype2")) await redis.cli("HSET", k, "a", "1");
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 1000, logger: silent });
    try {
      await store.start();
      await expect(store.apply(0, [tb("wrongtype", 5, 1)])).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.apply(0, [fw("wrongtype2", 5)])).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await store.close();
    }
  });

  it("with Redis's time, each 1 s window admits exactly its capacity, alone (one check) and beside another limit", async () => {
    // The one-check path trusts a key Redis still holds (lua/fixed_window.lua); the several-check path
    // reads and saves. Calls every ~15 ms through at least 3 windows: each window's answers are exact.
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 5000, logger: silent });
    try {
      await store.start();
      const byWindow = { alone: new Map<number, boolean[]>(), beside: new Map<number, boolean[]>() };
      const started = Date.now();
      while (byWindow.alone.size < 4 || Date.now() - started < 3100) {
        const [alone] = await store.apply(0, [fw("exact:alone", 3, 1, { windowSeconds: 1 })]);
        const [beside] = await store.apply(0, [fw("exact:beside", 3, 1, { windowSeconds: 1 }), fw("exact:other", 1_000_000, 1)]);
        for (const [which, r] of [
          ["alone", alone],
          ["beside", beside],
        ] as const) {
          const answers = byWindow[which].get(r.periodEndMs) ?? [];
          answers.push(r.allowed);
          byWindow[which].set(r.periodEndMs, answers);
        }
        await sleep(15);
      }
      for (const which of ["alone", "beside"] as const) {
        for (const [end, answers] of byWindow[which]) {
          const expected = answers.map((_, i) => i < 3); // the first 3 of each window, then refused
          expect(answers, `${which}, window ending ${end}`).toEqual(expected);
        }
        // The last window's key holds its count (refused calls take nothing) and ends with the window.
        const lastEnd = Math.max(...byWindow[which].keys());
        const key = windowKeyOfEnd(`exact:${which}`, 1, lastEnd);
        const count = Math.min(3, byWindow[which].get(lastEnd)!.length);
        // Read before the expiry: a key gone at the GET stays gone, and only its window's end removes it.
        const held = (await redis.cli("GET", key)).trim();
        const pexpiretime = Number(await redis.cli("PEXPIRETIME", key));
        if (held === "") expect(Date.now(), "the key is gone before its window ended").toBeGreaterThanOrEqual(lastEnd);
        else {
          expect(held).toBe(String(count));
          if (pexpiretime !== -2) expect(pexpiretime).toBe(lastEnd); // -2: the window ended between the reads
        }
      }
    } finally {
      await store.close();
    }
  });

  it("a fixed-window count from another window is not trusted under a pinned clock (Redis expires by its own)", async () => {
    // With Redis's own time a key Redis still holds is this window's (lua/fixed_window.lua); a pinned
    // time (tests, replays) can be a window Redis's clock has not reached, so the script checks the expiry.
    const clock = new ManualClock(Date.now() * 1000);
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 1000, logger: silent, clock });
    try {
      await store.start();
      const key = windowKey("stale", 60, clock.nowMicros() / 1000);
      expect((await store.apply(0, [fw("stale", 5, 5, { windowSeconds: 60 })]))[0]).toEqual(expect.objectContaining({ allowed: true, remaining: 0 }));
      clock.advance(120_000); // two windows on: the same parity's key, still alive in Redis
      expect(windowKey("stale", 60, clock.nowMicros() / 1000)).toBe(key);
      expect((await store.apply(0, [fw("stale", 5, 1, { windowSeconds: 60 })]))[0]).toEqual(expect.objectContaining({ allowed: true, remaining: 4 }));
      expect((await redis.cli("GET", key)).trim()).toBe("1");
      expect(Number(await redis.cli("PEXPIRETIME", key))).toBe((Math.floor(clock.nowMicros() / 60_000_000) + 1) * 60_000);
    } finally {
      await store.close();
    }
  });

  it("a token bucket saved at a later time than the store's (a clock stepped back) refills nothing, as in memory", async () => {
    // Redis's TIME can step back (NTP, a failover to a node whose clock is behind): the time since the save
    // counts as 0, not as a debt, on Redis (lua/token_bucket.lua) and in memory (counters/token_bucket/math.ts).
    const start = Date.now() * 1000;
    const clock = new ManualClock(start);
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 1000, logger: silent, clock });
    const memoryClock = new ManualClock(start);
    const memory = new MemoryStore({ clock: memoryClock });
    try {
      await store.start();
      const steps: [number, number][] = [
        [0, 5], // empty the bucket (capacity 5, 1 a second)
        [-10_000, 1], // 10 s back: refused, 1 s to one token
        [500, 1], // still before the save's time: nothing refilled (a refusal saves nothing)
        [9_500, 1], // back at the save's time: nothing refilled yet
        [1_000, 1], // a second later: one token
      ];
      const answers = [];
      for (const [ms, hits] of steps) {
        clock.set(clock.nowMicros() + ms * 1000);
        memoryClock.set(memoryClock.nowMicros() + ms * 1000);
        const check = tb("back", 5, 1, hits);
        const [onRedis] = await store.apply(0, [check]);
        const [inMemory] = await memory.apply(0, [check]);
        expect(onRedis).toEqual(inMemory);
        answers.push([onRedis.allowed, onRedis.remaining, onRedis.retryAfterMs]);
      }
      expect(answers).toEqual([
        [true, 0, -1],
        [false, 0, 1000],
        [false, 0, 1000],
        [false, 0, 1000],
        [true, 0, -1],
      ]);
    } finally {
      await store.close();
      await memory.close();
    }
  });

  it("counts the calls waiting for a node's reply (status and sluice_store_calls_in_flight)", async () => {
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 10_000, logger: silent });
    try {
      await store.start();
      expect(store.status().nodes[0].inFlight).toBe(0);
      await redis.cli("CLIENT", "PAUSE", "10000", "WRITE"); // scripts wait; redis-cli still answers
      const held = [store.apply(0, [fw("inflight", 5)]), store.apply(0, [fw("inflight", 5)])];
      const deadline = Date.now() + 5000;
      while (!(await redis.cli("INFO", "clients")).includes("blocked_clients:1") && Date.now() < deadline) await sleep(10);
      expect(store.status().nodes[0].inFlight).toBe(2);
      await redis.cli("CLIENT", "UNPAUSE");
      expect((await Promise.all(held)).map((r) => r[0].remaining)).toEqual([4, 3]);
      expect(store.status().nodes[0].inFlight).toBe(0);
    } finally {
      await redis.cli("CLIENT", "UNPAUSE");
      await store.close();
    }
  });

  it("reloads the script after SCRIPT FLUSH (NOSCRIPT)", async () => {
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 1000, logger: silent });
    try {
      await store.start();
      await redis.cli("DEL", "nos");
      expect((await store.apply(0, [fw("nos", 3)]))[0].remaining).toBe(2);
      await redis.cli("SCRIPT", "FLUSH");
      expect((await store.apply(0, [fw("nos", 3)]))[0].remaining).toBe(1);
    } finally {
      await store.close();
    }
  });
});
