// Leases on a real redis-server: three instances (each its own store connection and leases) share a limit
// of 300 per minute, leases living 100 ms. They never admit more than the limit and at least 90 % of it,
// and once their leases are closed the Redis counter holds exactly the hits they admitted; across a Redis
// killed and restarted (append-only file, fsync always) the limits without a lease go to the failure policy.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { Leases, type LeaseAnswer } from "../../src/approximate/leases.js";
import type { Check } from "../../src/store/store.js";
import type { FixedWindowCheck } from "../../src/counters/fixed_window/index.js";
import type { TokenBucketCheck } from "../../src/counters/token_bucket/index.js";
import type { SlidingWindowCheck } from "../../src/counters/sliding_window/index.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { RedisClusterStore } from "../../src/store/redis-cluster.js";
import { clusterSlot } from "../../src/store/hash.js";
import { ownerOf, startRedisCluster } from "../helpers/redis-cluster.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { sleep } from "../helpers/wait.js";
import { getWindowCount } from "../helpers/window-key.js";

const LIMIT = 300;
const INSTANCES = 3;
const CALLS = 1000;

const open: { close(): Promise<void> | void }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

/** Closes the leases (unused units back to the store) when a test ends. */
function closing(l: Leases): { close(): Promise<void> } {
  return { close: async () => void (await l.close(5000)) };
}

async function instances(redis: RedisProcess): Promise<{ stores: RedisStore[]; views: Leases[] }> {
  const stores: RedisStore[] = [];
  const views: Leases[] = [];
  for (let i = 0; i < INSTANCES; i++) {
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 2000, logger: pino({ level: "silent" }) });
    await store.start();
    const view = new Leases(store);
    stores.push(store);
    views.push(view);
    open.push(store, closing(view));
  }
  return { stores, views };
}

/** One request with one approximate limit; undefined when its store call failed (the failure policy's case). */
async function decide(l: Leases, check: Check, group = 0, intervalMs = 100): Promise<LeaseAnswer> {
  const r = l.decide([{ check, group, intervalMs }], false)!;
  return (r instanceof Promise ? await r : r).answers[0];
}

/** The written under-admission bound: at least 90 % of the limit once the load lasts past an interval. */
const AT_LEAST = 0.9 * LIMIT;

describe("approximate limits on one Redis, three instances", () => {
  it("admit at most the limit and at least 90 % of it; the store ends with exactly the admitted hits", async () => {
    const redis = await startRedis();
    open.push({ close: () => redis.stop() });
    await roomInWindow(60, 15, redisClock(redis));
    const { views } = await instances(redis);
    const check: FixedWindowCheck = { key: "sluice:{a:k=1}:fw60", algorithm: "fixed_window", capacity: LIMIT, windowSeconds: 60, hits: 1, shadow: false };
    let admitted = 0;
    // 1,000 calls over about 2.5 s, round robin over the instances.
    for (let i = 0; i < CALLS; i++) {
      if ((await decide(views[i % INSTANCES], check))?.allowed) admitted++;
      if (i % 40 === 39) await sleep(100);
    }
    expect(views.map((v) => v.leasedUnits).reduce((a, b) => a + b) + admitted).toBe(Number(await getWindowCount(redis.cli, check.key)));
    for (const v of views) expect(await v.close(5000)).toBe(0);
    expect(admitted).toBeLessThanOrEqual(LIMIT);
    expect(admitted).toBeGreaterThanOrEqual(AT_LEAST);
    expect(Number(await getWindowCount(redis.cli, check.key))).toBe(admitted);
    expect(views.map((v) => v.leasedUnits)).toEqual([0, 0, 0]);
  });

  it("a token bucket too: at most its capacity, at least 90 % of it; unused tokens go back", async () => {
    const redis = await startRedis();
    open.push({ close: () => redis.stop() });
    const { stores, views } = await instances(redis);
    // Refills 1 per hour: the run sees none.
    const check: TokenBucketCheck = { key: "sluice:{a:k=2}:tb", algorithm: "token_bucket", capacity: LIMIT, refillPerSecond: 1 / 3600, hits: 1, shadow: false };
    let admitted = 0;
    for (let i = 0; i < CALLS; i++) {
      if ((await decide(views[i % INSTANCES], check))?.allowed) admitted++;
      if (i % 40 === 39) await sleep(100);
    }
    for (const v of views) await v.close(5000);
    expect(admitted).toBeLessThanOrEqual(LIMIT);
    expect(admitted).toBeGreaterThanOrEqual(AT_LEAST);
    // The bucket holds what is left after every admitted hit: the unused tokens came back.
    const [left] = await stores[0].apply(0, [{ ...check, hits: 0 }]);
    expect(left.remaining).toBe(LIMIT - admitted);
  });

  it("a sliding window too, on a Redis Cluster (each lease call goes to the slot's master)", async () => {
    const cluster = await startRedisCluster(3);
    open.push({ close: () => cluster.stop() });
    const views: Leases[] = [];
    for (let i = 0; i < INSTANCES; i++) {
      const store = new RedisClusterStore({
        startupNodes: cluster.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })),
        timeoutMs: 2000,
        logger: pino({ level: "silent" }),
      });
      await store.start();
      const view = new Leases(store);
      views.push(view);
      open.push(store, closing(view));
    }
    const tag = "a:k=4";
    const group = clusterSlot(tag);
    const check: SlidingWindowCheck = { key: `sluice:{${tag}}:sw60`, algorithm: "sliding_window", capacity: LIMIT, windowSeconds: 60, hits: 1, shadow: false };
    const owner = cluster.nodes[await ownerOf(cluster, check.key)];
    await roomInWindow(60, 15, redisClock(owner));
    let admitted = 0;
    for (let i = 0; i < CALLS; i++) {
      if ((await decide(views[i % INSTANCES], check, group))?.allowed) admitted++;
      if (i % 40 === 39) await sleep(100);
    }
    for (const v of views) await v.close(5000);
    expect(admitted).toBeLessThanOrEqual(LIMIT);
    expect(admitted).toBeGreaterThanOrEqual(AT_LEAST);
    // index:cur:prev with this window's count holding every admitted hit.
    const [, cur, prev] = (await owner.cli("GET", check.key)).trim().split(":").map(Number);
    expect(cur + prev).toBe(admitted);
  }, 60_000);

  it("Redis killed and restarted mid-run: limits without a lease get no answer (the failure policy's), Redis counts each leased hit once", async () => {
    const redis = await startRedis({
      args: ["--appendonly", "yes", "--appendfsync", "always", "--dir", (await import("node:os")).tmpdir(), "--appendfilename", `approx-${Date.now()}.aof`],
    });
    open.push({ close: () => redis.stop() });
    await roomInWindow(60, 20, redisClock(redis));
    const { views } = await instances(redis);
    // A limit the run never reaches: every call is admitted, and the counter must end at exactly 600.
    const check: FixedWindowCheck = { key: "sluice:{a:k=3}:fw60", algorithm: "fixed_window", capacity: 100_000, windowSeconds: 60, hits: 1, shadow: false };
    let admitted = 0;
    let failed = 0;
    for (let i = 0; i < 600; i++) {
      if (i === 200) redis.kill();
      if (i === 400) await redis.restart();
      const a = await decide(views[i % INSTANCES], check);
      if (a === undefined) failed++;
      else if (a.allowed) admitted++;
      if (i % 20 === 19) await sleep(50);
    }
    expect(admitted + failed).toBe(600);
    expect(failed).toBeGreaterThan(0);
    for (const v of views) await v.close(5000);
    expect(views.map((v) => v.leasedUnits)).toEqual([0, 0, 0]);
    // Every hit admitted from a lease was counted; units leased and not used when Redis went away could not go back.
    expect(Number(await getWindowCount(redis.cli, check.key))).toBeGreaterThanOrEqual(admitted);
  });

  it("the key table is bounded: a new key pushes out the least recently used, whose unused units go back", async () => {
    const redis = await startRedis();
    open.push({ close: () => redis.stop() });
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 2000, logger: pino({ level: "silent" }) });
    await store.start();
    const view = new Leases(store, { maxKeys: 3 });
    open.push(store, closing(view));
    const check = (k: number): FixedWindowCheck => ({
      key: `sluice:{b:k=${k}}:fw60`,
      algorithm: "fixed_window",
      capacity: 1000,
      windowSeconds: 60,
      hits: 1,
      shadow: false,
    });
    // A long interval: no lease ends on its own during the test.
    const one = (k: number) => decide(view, check(k), 0, 10_000);
    for (const k of [1, 2, 3]) for (let i = 0; i < 3; i++) expect((await one(k))?.allowed).toBe(true);
    const before = Number(await getWindowCount(redis.cli, check(1).key));
    expect(before).toBeGreaterThanOrEqual(3);
    expect((await one(4))?.allowed).toBe(true);
    // Key 1 was the least recently used: its lease ended, and its unused units went back to the store.
    await view.close(5000);
    expect(Number(await getWindowCount(redis.cli, check(1).key))).toBe(3);
    expect(Number(await getWindowCount(redis.cli, check(4).key))).toBe(1);
  });
});
