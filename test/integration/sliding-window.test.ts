// algorithm: sliding_window. At the store: a burst at the end of one window and one at the start of
// the next admit the limit (a fixed window admits twice the limit there), on the memory store and on a
// real Redis, time pinned. End to end over gRPC: one Redis, a Redis Cluster, two shards and the memory
// store refuse the sixth call of five per minute, with the key, TTL, /rules, explain and metrics.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FixedWindowCheck } from "../../src/counters/fixed_window/index.js";
import type { SlidingWindowCheck } from "../../src/counters/sliding_window/index.js";
import { MemoryStore } from "../../src/store/memory.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import type { Store } from "../../src/store/store.js";
import { descriptor, OK, OVER_LIMIT, retryAfter, rlsClient } from "../helpers/grpc-client.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { scrape, sampleValue } from "../helpers/prom.js";
import { ownerOf, startRedisCluster, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";

const MINUTE_US = 60_000_000;

describe("a burst on each side of a window boundary, 10 per minute", () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  const stores: { name: string; make(clock: ManualClock): Promise<Store> }[] = [
    { name: "memory", make: async (clock) => new MemoryStore({ clock }) },
    {
      name: "Redis",
      make: async (clock) => {
        const s = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 5000, logger: pino({ level: "silent" }), clock });
        await s.start();
        return s;
      },
    },
  ];

  for (const { name, make } of stores) {
    it(`${name}: the sliding window admits 10 across the boundary where a fixed window admits 20`, async () => {
      // A minute ahead of the real time, so PXAT keys outlive Redis's own clock.
      const windowStartUs = (Math.floor(Date.now() / 60_000) + 2) * MINUTE_US;
      const clock = new ManualClock(windowStartUs + 59_900_000);
      const store = await make(clock);
      const tag = `${name}:${windowStartUs}`;
      const sw: SlidingWindowCheck = { key: `sw:${tag}`, algorithm: "sliding_window", capacity: 10, windowSeconds: 60, hits: 1, shadow: false };
      const fw: FixedWindowCheck = { key: `fw:${tag}`, algorithm: "fixed_window", capacity: 10, windowSeconds: 60, hits: 1, shadow: false };
      const burst = async (check: SlidingWindowCheck | FixedWindowCheck): Promise<number> => {
        let admitted = 0;
        for (let i = 0; i < 10; i++) if ((await store.apply(0, [check]))[0].allowed) admitted++;
        return admitted;
      };
      try {
        // 100 ms before the boundary, then 100 ms after it.
        const before = [await burst(sw), await burst(fw)];
        clock.advance(200);
        const after = [await burst(sw), await burst(fw)];
        expect({ before, after }).toEqual({ before: [10, 10], after: [0, 10] });
        // The refusal says when one more fits: the previous window's 10 weighted down to 9 (6 s in).
        const refused = (await store.apply(0, [sw]))[0];
        expect(refused).toEqual({ allowed: false, remaining: 0, resetSeconds: 60, retryAfterMs: 5900, periodEndMs: windowStartUs / 1000 + 120_000 });
        clock.advance(5900);
        expect((await store.apply(0, [sw]))[0]).toEqual({
          allowed: true,
          remaining: 0,
          resetSeconds: 114,
          retryAfterMs: -1,
          periodEndMs: windowStartUs / 1000 + 120_000,
        });
        // Half way into the window the previous 10 weigh 5, plus the 1 above: the estimate assumes they were spread evenly.
        clock.advance(30_000 - 6000);
        expect(await burst(sw)).toBe(4);
      } finally {
        await store.close();
      }
    });
  }
});

const RULES = `
domain: sw
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_window}
`;

describe("end to end: five per minute, sliding", () => {
  const rules = ruleDir({ "sw.yaml": RULES });
  let redis: RedisProcess;
  let shard: RedisProcess;
  let cluster: RedisClusterProcess;
  beforeAll(async () => {
    [redis, shard, cluster] = await Promise.all([startRedis(), startRedis(), startRedisCluster(3)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([redis?.stop(), shard?.stop(), cluster?.stop()]);
  });

  async function sixCalls(sluice: SluiceProcess, user: string): Promise<{ codes: number[]; retry: string | undefined; remaining: number[] }> {
    const client = rlsClient(sluice.port);
    try {
      const codes: number[] = [];
      const remaining: number[] = [];
      let retry: string | undefined;
      for (let i = 0; i < 6; i++) {
        const res = await client.shouldRateLimit({ domain: "sw", descriptors: [descriptor({ user })] });
        codes.push(res.overall_code);
        remaining.push(res.statuses[0].limit_remaining ?? 0);
        retry = retryAfter(res);
      }
      return { codes, retry, remaining };
    } finally {
      client.close();
    }
  }

  const FIVE_OF_SIX = [OK, OK, OK, OK, OK, OVER_LIMIT];

  async function expectSliding(args: string[], user: string): Promise<SluiceProcess> {
    const sluice = await startSluice(["--config", rules, ...args], { SLUICE_STORE_TIMEOUT_MS: "2000" });
    const r = await sixCalls(sluice, user);
    expect(r.codes).toEqual(FIVE_OF_SIX);
    expect(r.remaining).toEqual([4, 3, 2, 1, 0, 0]);
    // One more fits only once the five have slid out far enough: under two windows away.
    expect(Number(r.retry)).toBeGreaterThanOrEqual(1);
    expect(Number(r.retry)).toBeLessThanOrEqual(120);
    return sluice;
  }

  it("one Redis: the key holds index:count:previous, expires within two windows; /rules and metrics show it", async () => {
    const sluice = await expectSliding(["--redis", redis.url], "u1");
    try {
      const key = "sluice:{sw:user=u1}:sw60";
      const value = (await redis.cli("GET", key)).trim();
      const pttl = Number((await redis.cli("PTTL", key)).trim());
      // Five counted in this window, or (a boundary passed between the calls) some in the previous one.
      expect(value).toMatch(/^\d+:\d:\d$/);
      const [, cur, prev] = value.split(":").map(Number);
      expect(cur + prev).toBe(5);
      expect(pttl).toBeGreaterThan(60_000);
      expect(pttl).toBeLessThanOrEqual(120_000);

      const rules = await (await fetch(`http://127.0.0.1:${sluice.adminPort}/rules`)).json();
      expect(rules.domains.sw.descriptors[0].limits[0]).toMatchObject({ unit: "minute", requests_per_unit: 5, algorithm: "sliding_window" });
      const samples = await scrape(sluice.adminPort);
      const rule = { domain: "sw", rule: "sw.user", limit: "rate_limit" };
      expect([
        sampleValue(samples, "sluice_rule_hits_total", rule),
        sampleValue(samples, "sluice_rule_within_limit_total", rule),
        sampleValue(samples, "sluice_rule_near_limit_total", rule),
        sampleValue(samples, "sluice_rule_over_limit_total", rule),
      ]).toEqual([6, 5, 1, 1]);
    } finally {
      await sluice.stop();
    }
  });

  it("a Redis Cluster: the key is on the node that owns its slot", async () => {
    const sluice = await expectSliding(["--redis-cluster", cluster.spec], "u2");
    try {
      const key = "sluice:{sw:user=u2}:sw60";
      const node = cluster.nodes[await ownerOf(cluster, key)];
      expect((await node.cli("GET", key)).trim()).toMatch(/^\d+:\d:\d$/);
    } finally {
      await sluice.stop();
    }
  });

  it("two shards and the memory store", async () => {
    for (const args of [["--redis", `${redis.url},${shard.url}`], []]) {
      const sluice = await expectSliding(args, "u3");
      await sluice.stop();
    }
  });

  it("explain names the algorithm and the key", () => {
    const out = runCli(["explain", "--config", rules, "--domain", "sw", "--descriptor", "user=u9"]).stdout;
    expect(out).toContain("5 per minute, sliding_window");
    expect(out).toContain("\n      key: sluice:{sw:user=u9}:sw60\n");
  });
});
