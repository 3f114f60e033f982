// approximate: {sync_interval_ms: 100} end to end: three sluice processes on one real Redis, 300 per
// minute, 1,000 calls in waves over about 4 s spread over the three. Approximate: at least 300 admitted
// and at most the written bound, with far fewer Redis calls than requests; exact: exactly 300.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EARLY_SYNC_SHARE } from "../../src/approximate/approximate-counters.js";
import { descriptor, OK, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { scrape, sampleValue } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";

const LIMIT = 300;
const INSTANCES = 3;
const WAVES = 10;
const PER_WAVE = 100;
const rules = (extra: string) =>
  ruleDir({
    "ap.yaml": `
domain: ap
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: ${LIMIT}${extra}}
`,
  });

/**
 * The bound the README writes down: beyond the limit, per other instance, its unsent share of the limit
 * (the early sync) plus what it admits while that sync is out; at most one wave of calls here.
 */
const BOUND = LIMIT + (INSTANCES - 1) * (Math.ceil(EARLY_SYNC_SHARE * LIMIT) + Math.ceil(PER_WAVE / INSTANCES));

describe("three instances, one Redis, 300 per minute", () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  async function run(extra: string, user: string): Promise<{ admitted: number; sluices: SluiceProcess[] }> {
    const dir = rules(extra);
    const sluices = await Promise.all(
      Array.from({ length: INSTANCES }, () => startSluice(["--config", dir, "--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "2000" })),
    );
    const clients: RlsClient[] = sluices.map((s) => rlsClient(s.port));
    await roomInWindow(60, 15, redisClock(redis));
    let admitted = 0;
    try {
      for (let w = 0; w < WAVES; w++) {
        const calls = Array.from({ length: PER_WAVE }, (_, i) =>
          clients[(w * PER_WAVE + i) % INSTANCES].shouldRateLimit({ domain: "ap", descriptors: [descriptor({ user })] }),
        );
        for (const res of await Promise.all(calls)) if (res.overall_code === OK) admitted++;
        await new Promise((r) => setTimeout(r, 400));
      }
    } finally {
      for (const c of clients) c.close();
    }
    return { admitted, sluices };
  }

  it("approximate: at least the limit, at most the bound, synced in batches; all of it reaches Redis at shutdown", async () => {
    const { admitted, sluices } = await run(", approximate: {sync_interval_ms: 100}", "a1");
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(BOUND);
    let syncs = 0;
    let decided = 0;
    for (const s of sluices) {
      const samples = await scrape(s.adminPort);
      syncs += sampleValue(samples, "sluice_approximate_syncs_total", { result: "ok" }) ?? 0;
      decided += sampleValue(samples, "sluice_approximate_decisions_total") ?? 0;
    }
    // Every call was decided locally, and Redis saw a sync per instance and interval at most, not a call per request.
    expect(decided).toBe(WAVES * PER_WAVE);
    expect(syncs).toBeGreaterThan(0);
    expect(syncs).toBeLessThan((WAVES * PER_WAVE) / 5);
    await Promise.all(sluices.map((s) => s.stop()));
    expect(Number(await redis.cli("GET", "sluice:{ap:user=a1}:fw60"))).toBe(admitted);
  });

  it("exact: exactly the limit", async () => {
    const { admitted, sluices } = await run("", "e1");
    await Promise.all(sluices.map((s) => s.stop()));
    expect(admitted).toBe(LIMIT);
  });

  it("on the memory store: exact, and said so at start", async () => {
    const sluice = await startSluice(["--config", rules(", approximate: {sync_interval_ms: 100}")]);
    try {
      await sluice.waitForLog((l) => l.msg === "approximate limits are decided exactly: the store counts in this process");
      const client = rlsClient(sluice.port);
      const codes: number[] = [];
      for (let i = 0; i < LIMIT + 5; i++) codes.push((await client.shouldRateLimit({ domain: "ap", descriptors: [descriptor({ user: "m1" })] })).overall_code);
      client.close();
      expect(codes.filter((c) => c === OK).length).toBe(LIMIT);
      expect(sampleValue(await scrape(sluice.adminPort), "sluice_approximate_decisions_total")).toBeUndefined();
    } finally {
      await sluice.stop();
    }
  });

  it("on two shards: each key syncs to its own shard, and shutdown leaves each count there", async () => {
    const shard = await startRedis();
    const sluice = await startSluice(["--config", rules(", approximate: {sync_interval_ms: 100}"), "--redis", `${redis.url},${shard.url}`]);
    try {
      await roomInWindow(60, 15, redisClock(redis));
      const client = rlsClient(sluice.port);
      const users = Array.from({ length: 8 }, (_, i) => `s${i}`);
      for (const user of users) for (let i = 0; i < 3; i++) await client.shouldRateLimit({ domain: "ap", descriptors: [descriptor({ user })] });
      client.close();
      await sluice.stop();
      const counts = new Map<string, number>();
      for (const r of [redis, shard]) {
        for (const user of users) {
          const v = (await r.cli("GET", `sluice:{ap:user=${user}}:fw60`)).trim();
          if (v !== "") counts.set(user, (counts.get(user) ?? 0) + Number(v));
        }
      }
      // Every user's 3 hits, each on exactly one shard, and both shards used.
      expect([...counts.values()]).toEqual(users.map(() => 3));
      const onFirst = (await redis.cli("KEYS", "sluice:{ap:user=s*")).split("\n").filter((k) => k !== "").length;
      expect(onFirst).toBeGreaterThan(0);
      expect(onFirst).toBeLessThan(users.length);
    } finally {
      await sluice.stop();
      await shard.stop();
    }
  });

  it("Redis killed and restarted during the run: every admitted hit reaches it once", async () => {
    const dir = (await import("node:fs")).mkdtempSync((await import("node:path")).join((await import("node:os")).tmpdir(), "sluice-aof-"));
    // Append-only, fsync always: a SIGKILL loses nothing Redis acknowledged, so the counter must end exact.
    const aof = await startRedis({ args: ["--appendonly", "yes", "--appendfsync", "always", "--dir", dir] });
    const big = ruleDir({
      "ap.yaml": "domain: ap\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100000, approximate: {sync_interval_ms: 100}}\n",
    });
    const sluices = await Promise.all(
      Array.from({ length: INSTANCES }, () =>
        startSluice(["--config", big, "--redis", aof.url], { SLUICE_STORE_TIMEOUT_MS: "2000", SLUICE_SHUTDOWN_GRACE_MS: "10000" }),
      ),
    );
    const clients = sluices.map((s) => rlsClient(s.port));
    try {
      await roomInWindow(60, 15, redisClock(aof));
      let admitted = 0;
      for (let w = 0; w < WAVES; w++) {
        if (w === 3) aof.kill();
        if (w === 6) await aof.restart();
        const calls = Array.from({ length: PER_WAVE }, (_, i) =>
          clients[(w * PER_WAVE + i) % INSTANCES].shouldRateLimit({ domain: "ap", descriptors: [descriptor({ user: "k1" })] }),
        );
        for (const res of await Promise.all(calls)) if (res.overall_code === OK) admitted++;
        await new Promise((r) => setTimeout(r, 200));
      }
      // Every call was admitted (the limit is far away), also while Redis was down: counted locally.
      expect(admitted).toBe(WAVES * PER_WAVE);
    } finally {
      for (const c of clients) c.close();
      await Promise.all(sluices.map((s) => s.stop()));
    }
    // Shutdown flushed what was left: the counter holds each admitted hit once.
    expect(Number(await aof.cli("GET", "sluice:{ap:user=k1}:fw60"))).toBe(WAVES * PER_WAVE);
    await aof.stop();
  }, 60_000);
});
