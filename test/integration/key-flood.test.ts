// Key flood: 200,000 requests, each with a new client value. Redis grows by at
// most a fixed budget per key and is back where it started once the longest TTL has passed; sluice's
// own memory stays bounded (Redis store: no per-key state; memory store: SLUICE_MEMORY_MAX_KEYS).
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { flood } from "../helpers/flood.js";
import { descriptor, OK, OVER_LIMIT, rlsClient } from "../helpers/grpc-client.js";
import { Limiter } from "../../src/limiter/limiter.js";
import { loadRuleDir } from "../../src/rules/load.js";
import { startH2Server } from "../../src/server/grpc/h2/server.js";
import { serveSettings } from "../../src/settings/settings.js";
import { InspectableMemoryStore } from "../helpers/inspectable-memory-store.js";
import { collectGarbage, MiB, rssBytes } from "../helpers/proc.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";
import { encodeRequest, grpcFrame } from "../../bench/lib/frame.mjs";

const RULES = `
domain: flood
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1}
`;

const REQUESTS = 200_000;
/** A flood fails when sluice answers nothing for this long; how long it takes in all is the host's (2-3 min on a busy one). */
const STALL_MS = 30_000;
/** Waiting for Redis to expire keys: its expiry cycle gets what CPU the host leaves it, so the wait is generous. */
const EXPIRY_MS = 120_000;
/**
 * Redis bytes per key, all included (jemalloc size classes): the key `sluice:{flood:client=c123456}:fw1`
 * (33 bytes -> 48; 35 with the odd seconds' `:1`, still 48), its dict entry (32) and expires entry (32), the two hash tables' slots (~16-32),
 * the value (a shared integer: 0). Measured 125 at 200,000 keys; the budget leaves room for a longer
 * domain or value.
 */
const BUDGET_PER_KEY = 150;

const request = (i: number) => grpcFrame(encodeRequest("flood", [[["client", `c${i}`]]]));

describe("key flood against Redis", () => {
  let redis: RedisProcess;
  let sluice: SluiceProcess;
  let admin: Redis;

  beforeAll(async () => {
    // DEBUG SET-ACTIVE-EXPIRE: the flood is measured with every key still in memory (the worst case,
    // as with a longer window), then expiry is switched back on.
    redis = await startRedis({ args: ["--enable-debug-command", "yes"] });
    sluice = await startSluice(["--config", ruleDir({ "rules.yaml": RULES }), "--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "5000" });
    admin = new Redis(redis.port, "127.0.0.1", { lazyConnect: true });
    await admin.connect();
  });
  afterAll(async () => {
    admin?.disconnect();
    await sluice?.stop();
    await redis?.stop();
  });

  const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await admin.info("memory"))![1]);

  it(`${REQUESTS} new client values: at most ${BUDGET_PER_KEY} bytes per key, all gone after the 1 s TTL; sluice's RSS bounded`, async () => {
    const warm = await flood(sluice.port, 2000, 64, (i) => request(REQUESTS + i), STALL_MS);
    expect(warm.statuses).toEqual({ "0": 2000 });
    await until(
      async () => (await admin.dbsize()) === 0,
      EXPIRY_MS,
      () => "the warm-up's keys to expire",
    );
    const base = await usedMemory();
    const rssBefore = rssBytes(sluice.proc.pid!);
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssBytes(sluice.proc.pid!))), 200);

    await admin.call("DEBUG", "SET-ACTIVE-EXPIRE", "0");
    const r = await flood(sluice.port, REQUESTS, 128, request, STALL_MS);
    clearInterval(sampler);
    expect(r.statuses).toEqual({ "0": REQUESTS });
    const keys = await admin.dbsize();
    const peak = await usedMemory();
    const perKey = (peak - base) / keys;
    // One key per new value. A handful written in the last instant of a second expire at once (their
    // window ended while the script ran), even with active expiry off.
    expect(keys).toBeLessThanOrEqual(REQUESTS);
    expect(keys).toBeGreaterThan(REQUESTS - 100);
    // The real key format (a SCAN page may be empty; a random key never is while keys exist).
    expect(await admin.randomkey()).toMatch(/^sluice:\{flood:client=c\d+\}:fw1(:1)?$/); // odd seconds: :1

    await admin.call("DEBUG", "SET-ACTIVE-EXPIRE", "1");
    const expiryStart = Date.now();
    await until(
      async () => (await admin.dbsize()) === 0,
      EXPIRY_MS,
      () => "every key to expire",
      50,
    );
    const expiredAfterMs = Date.now() - expiryStart;
    const after = await usedMemory();
    const rssAfter = rssBytes(sluice.proc.pid!);
    console.log(
      `flood: ${REQUESTS} calls in ${r.ms} ms (${Math.round((REQUESTS / r.ms) * 1000)}/s); Redis used_memory base ${kib(base)}, ` +
        `peak ${kib(peak)} with ${keys} keys = ${perKey.toFixed(1)} B/key; all expired ${expiredAfterMs} ms after expiry resumed, ` +
        `then ${kib(after)} (${after - base >= 0 ? "+" : ""}${after - base} B); sluice RSS ${mib(rssBefore)} -> peak ${mib(rssPeak)} -> ${mib(rssAfter)}`,
    );
    expect(perKey).toBeLessThanOrEqual(BUDGET_PER_KEY);
    expect(Math.abs(after - base)).toBeLessThan(256 * 1024);
    // With Redis as the store sluice keeps nothing per key: its memory does not follow the key count.
    expect(rssPeak).toBeLessThan(rssBefore + 96 * MiB);
  }, 600_000);
});

describe("key flood against the memory store", () => {
  const MAX_KEYS = 2000;
  let sluice: SluiceProcess;

  beforeAll(async () => {
    sluice = await startSluice(["--config", ruleDir({ "rules.yaml": RULES })], { SLUICE_MEMORY_MAX_KEYS: String(MAX_KEYS) });
  });
  afterAll(async () => {
    expect(await sluice?.stop()).toBe(0);
  });

  it(`SLUICE_MEMORY_MAX_KEYS=${MAX_KEYS}: the least recently used counter goes exactly when key ${MAX_KEYS + 1} arrives`, async () => {
    const client = rlsClient(sluice.port);
    const call = (user: string) => client.shouldRateLimit({ domain: "flood", descriptors: [descriptor({ user })] });
    expect((await call("victim")).overall_code).toBe(OK);
    expect((await call("victim")).overall_code).toBe(OVER_LIMIT); // a touch: now the most recently used
    const fill = (from: number, n: number) => flood(sluice.port, n, 32, (i) => grpcFrame(encodeRequest("flood", [[["user", `u${from + i}`]]])), STALL_MS);
    expect((await fill(0, MAX_KEYS - 1)).statuses).toEqual({ "0": MAX_KEYS - 1 });
    expect((await call("victim")).overall_code).toBe(OVER_LIMIT); // MAX_KEYS keys: still kept
    expect((await fill(MAX_KEYS, MAX_KEYS - 1)).statuses).toEqual({ "0": MAX_KEYS - 1 });
    // victim was touched last before these MAX_KEYS - 1 new keys: still there; one more pushes it out.
    expect((await call("victim")).overall_code).toBe(OVER_LIMIT);
    expect((await fill(2 * MAX_KEYS, MAX_KEYS)).statuses).toEqual({ "0": MAX_KEYS });
    expect((await call("victim")).overall_code).toBe(OK); // evicted: a fresh counter
    client.close();
  });
});

describe("key flood against the memory store, in one process", () => {
  it("the store never holds more than its cap, and the heap after GC stops growing there", async () => {
    const MAX_KEYS = 1000;
    const settings = serveSettings([], { SLUICE_MEMORY_MAX_KEYS: String(MAX_KEYS) });
    const store = new InspectableMemoryStore({ maxKeys: settings.memoryMaxKeys });
    const rules = loadRuleDir(ruleDir({ "rules.yaml": RULES }), { mergeDomains: false }).rules!;
    const server = await startH2Server(new Limiter(rules, store), {
      host: "127.0.0.1",
      port: 0,
      bounds: settings.bounds,
      maxMessageBytes: settings.maxMessageBytes,
      logger: pino({ level: "silent" }),
    });
    let largest = 0;
    const sampler = setInterval(() => (largest = Math.max(largest, store.size)), 5);
    const big = (i: number) => grpcFrame(encodeRequest("flood", [[["user", `${i}:`.padEnd(2000, "x")]]]));
    const heapAfterGc = () => {
      collectGarbage();
      return process.memoryUsage().heapUsed;
    };

    expect((await flood(server.port, 2 * MAX_KEYS, 32, big, STALL_MS)).statuses).toEqual({ "0": 2 * MAX_KEYS });
    const heapAtCap = heapAfterGc();
    const r = await flood(server.port, 8000, 32, (i) => big(10_000 + i), STALL_MS);
    expect(r.statuses).toEqual({ "0": 8000 });
    const heapAfter = heapAfterGc();
    clearInterval(sampler);
    await server.shutdown(100);
    console.log(
      `memory store flood: ${store.size} keys (largest seen ${largest}); heap after GC ${mib(heapAtCap)} at the cap, ${mib(heapAfter)} after 8,000 more 2 KB keys`,
    );
    expect(store.size).toBe(MAX_KEYS);
    expect(largest).toBeLessThanOrEqual(MAX_KEYS);
    // Uncapped, 8,000 more keys of 2 KB would hold 16+ MiB more.
    expect(heapAfter).toBeLessThan(heapAtCap + 4 * MiB);
  });
});

const kib = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
const mib = (n: number) => `${(n / MiB).toFixed(1)} MiB`;
