// ApproximateCounters on a real redis-server: three instances (each its own store connection and local
// view) share a limit of 300 per minute, synced every 100 ms. They admit at least the limit and at most
// the written bound, and after a final flush the Redis counter holds every hit they admitted, once,
// also across a Redis killed and restarted (append-only file, fsync always) in the middle of the run.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ApproximateCounters, EARLY_SYNC_SHARE } from "../../src/approximate/approximate-counters.js";
import type { FixedWindowCheck } from "../../src/counters/fixed_window/index.js";
import type { TokenBucketCheck } from "../../src/counters/token_bucket/index.js";
import type { SlidingWindowCheck } from "../../src/counters/sliding_window/index.js";
import { RedisStore } from "../../src/store/redis.js";
import { RedisClusterStore } from "../../src/store/redis-cluster.js";
import { clusterSlot } from "../../src/store/hash.js";
import { ownerOf, startRedisCluster } from "../helpers/redis-cluster.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";

const LIMIT = 300;
const INSTANCES = 3;
const CALLS = 1000;

const open: { close(): Promise<void> | void }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

async function instances(redis: RedisProcess): Promise<{ stores: RedisStore[]; views: ApproximateCounters[] }> {
  const stores: RedisStore[] = [];
  const views: ApproximateCounters[] = [];
  for (let i = 0; i < INSTANCES; i++) {
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 2000, logger: pino({ level: "silent" }) });
    await store.start();
    const view = new ApproximateCounters(store);
    stores.push(store);
    views.push(view);
    open.push(store, view);
  }
  return { stores, views };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The written bound: the others' unsent hits, one early-sync share of the limit each, plus one sync round trip of calls. */
const BOUND = LIMIT + (INSTANCES - 1) * Math.ceil(EARLY_SYNC_SHARE * LIMIT) + 2 * INSTANCES;

describe("approximate limits on one Redis, three instances", () => {
  it("admit at least the limit and at most the bound; the store ends with exactly the admitted hits", async () => {
    const redis = await startRedis();
    open.push({ close: () => redis.stop() });
    await roomInWindow(60, 15, redisClock(redis));
    const { views } = await instances(redis);
    const check: FixedWindowCheck = { key: "sluice:{a:k=1}:fw60", algorithm: "fixed_window", capacity: LIMIT, windowSeconds: 60, hits: 1, shadow: false };
    let admitted = 0;
    // 1,000 calls over about 2.5 s, round robin over the instances.
    for (let i = 0; i < CALLS; i++) {
      const r = views[i % INSTANCES].decide([{ check, group: 0, syncIntervalMs: 100 }], false)!;
      if (r[0].allowed) admitted++;
      if (i % 40 === 39) await sleep(100);
    }
    for (const v of views) await v.flush(5000);
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(BOUND);
    expect(Number(await redis.cli("GET", check.key))).toBe(admitted);
    expect(views.map((v) => v.pendingHits)).toEqual([0, 0, 0]);
  });

  it("a token bucket too: at least its capacity, at most the bound", async () => {
    const redis = await startRedis();
    open.push({ close: () => redis.stop() });
    const { stores, views } = await instances(redis);
    // Refills 1 per hour: the run sees none.
    const check: TokenBucketCheck = { key: "sluice:{a:k=2}:tb", algorithm: "token_bucket", capacity: LIMIT, refillPerSecond: 1 / 3600, hits: 1, shadow: false };
    let admitted = 0;
    for (let i = 0; i < CALLS; i++) {
      if (views[i % INSTANCES].decide([{ check, group: 0, syncIntervalMs: 100 }], false)![0].allowed) admitted++;
      if (i % 40 === 39) await sleep(100);
    }
    for (const v of views) await v.flush(5000);
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(BOUND);
    // The bucket holds what is left after every admitted hit (below empty when more were admitted).
    const [left] = await stores[0].apply(0, [{ ...check, hits: 0 }]);
    expect(left.remaining).toBe(Math.max(LIMIT - admitted, 0));
  });

  it("a sliding window too, on a Redis Cluster (each batch goes to the slot's master)", async () => {
    const cluster = await startRedisCluster(3);
    open.push({ close: () => cluster.stop() });
    const views: ApproximateCounters[] = [];
    for (let i = 0; i < INSTANCES; i++) {
      const store = new RedisClusterStore({
        startupNodes: cluster.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })),
        timeoutMs: 2000,
        logger: pino({ level: "silent" }),
      });
      await store.start();
      const view = new ApproximateCounters(store);
      views.push(view);
      open.push(store, view);
    }
    const tag = "a:k=4";
    const group = clusterSlot(tag);
    const check: SlidingWindowCheck = { key: `sluice:{${tag}}:sw60`, algorithm: "sliding_window", capacity: LIMIT, windowSeconds: 60, hits: 1, shadow: false };
    const owner = cluster.nodes[await ownerOf(cluster, check.key)];
    await roomInWindow(60, 15, redisClock(owner));
    let admitted = 0;
    for (let i = 0; i < CALLS; i++) {
      if (views[i % INSTANCES].decide([{ check, group, syncIntervalMs: 100 }], false)![0].allowed) admitted++;
      if (i % 40 === 39) await sleep(100);
    }
    for (const v of views) await v.flush(5000);
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(BOUND);
    // index:cur:prev with this window's count holding every admitted hit.
    const [, cur, prev] = (await owner.cli("GET", check.key)).trim().split(":").map(Number);
    expect(cur + prev).toBe(admitted);
  }, 60_000);

  it("Redis killed and restarted mid-run: hits count locally meanwhile and are synced once", async () => {
    const redis = await startRedis({
      args: ["--appendonly", "yes", "--appendfsync", "always", "--dir", (await import("node:os")).tmpdir(), "--appendfilename", `approx-${Date.now()}.aof`],
    });
    open.push({ close: () => redis.stop() });
    await roomInWindow(60, 20, redisClock(redis));
    const { views } = await instances(redis);
    // A limit the run never reaches: every call is admitted, and the counter must end at exactly 600.
    const check: FixedWindowCheck = { key: "sluice:{a:k=3}:fw60", algorithm: "fixed_window", capacity: 100_000, windowSeconds: 60, hits: 1, shadow: false };
    let admitted = 0;
    for (let i = 0; i < 600; i++) {
      if (i === 200) redis.kill();
      if (i === 400) await redis.restart();
      if (views[i % INSTANCES].decide([{ check, group: 0, syncIntervalMs: 100 }], false)![0].allowed) admitted++;
      if (i % 20 === 19) await sleep(50);
    }
    expect(admitted).toBe(600);
    for (const v of views) await v.flush(10_000);
    expect(views.map((v) => v.pendingHits)).toEqual([0, 0, 0]);
    expect(Number(await redis.cli("GET", check.key))).toBe(600);
  });

  it("the view is bounded: with every key holding unsent hits a new key is refused a place (decided exactly); once synced, the oldest goes", async () => {
    const redis = await startRedis();
    open.push({ close: () => redis.stop() });
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 2000, logger: pino({ level: "silent" }) });
    await store.start();
    const view = new ApproximateCounters(store, { maxKeys: 3 });
    open.push(store, view);
    const check = (k: number): FixedWindowCheck => ({
      key: `sluice:{b:k=${k}}:fw60`,
      algorithm: "fixed_window",
      capacity: 1000,
      windowSeconds: 60,
      hits: 1,
      shadow: false,
    });
    // A long interval: nothing syncs on its own during the test.
    const one = (k: number) => view.decide([{ check: check(k), group: 0, syncIntervalMs: 10_000 }], false);
    for (const k of [1, 2, 3]) expect(one(k)?.[0].allowed).toBe(true);
    expect(one(4)).toBeUndefined();
    expect(view.pendingHits).toBe(3);
    await view.flush(5000);
    expect(view.pendingHits).toBe(0);
    expect(one(4)?.[0]).toEqual(expect.objectContaining({ allowed: true, remaining: 999 }));
    // Key 1 was the least recently used: dropped, its count is read from the store at its next sync.
    expect(Number(await redis.cli("GET", check(1).key))).toBe(1);
  });
});
