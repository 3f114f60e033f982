// What the Redis store keeps per key (lua/*.lua): a token bucket is one 16-byte string (tokens and
// last as two doubles) with its TTL; fixed-window counts are plain integers expiring at the window end.
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../helpers/manual-clock.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { fw, tb } from "../contract/store.contract.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { windowKey } from "../helpers/window-key.js";

// Near the real time: a fixed-window key expires at an absolute time (PXAT), which must lie ahead.
const NOW_US = Math.floor(Date.now() / 1000) * 1_000_000 + 123_456;
let redis: RedisProcess;
let client: Redis;
let store: RedisStore;
beforeAll(async () => {
  redis = await startRedis();
  client = new Redis({ port: redis.port, lazyConnect: true });
  await client.connect();
  // The scripts' time pinned: the expected levels are exact.
  store = new RedisStore({
    servers: [{ host: "127.0.0.1", port: redis.port }],
    timeoutMs: 5000,
    logger: pino({ level: "silent" }),
    clock: new ManualClock(NOW_US),
  });
  await store.start();
});
afterAll(async () => {
  await store?.close();
  client?.disconnect();
  await redis?.stop();
});

/** tokens and last of a bucket key as stored (struct 'dd': native byte order, little-endian here). */
async function bucket(key: string): Promise<[number, number]> {
  const v = (await client.getBuffer(key))!;
  expect(v.length).toBe(16);
  return [v.readDoubleLE(0), v.readDoubleLE(8)];
}

describe("Redis key encoding", () => {
  it("a token bucket is one 16-byte string with the time to fill from empty as TTL", async () => {
    const r = await store.apply(0, [tb("enc:tb", 10, 0.5, 3)]);
    expect(r[0]).toEqual({ allowed: true, remaining: 7, resetSeconds: 6, retryAfterMs: -1, periodEndMs: 0 });
    expect(await client.type("enc:tb")).toBe("string");
    expect(await bucket("enc:tb")).toEqual([7, NOW_US]);
    expect(await client.ttl("enc:tb")).toBe(20);
  });

  it("a key of another type is a script error (the failure policy answers), never a silent reset", async () => {
    await client.hset("enc:other", "tokens", "2.5");
    // In sluice's words; Redis's own reply as the detail.
    await expect(store.apply(0, [tb("enc:other", 10, 0.5)])).rejects.toMatchObject({
      message: expect.stringMatching(/refused the rate-limit script: a key holds another kind of value$/),
      detail: expect.stringMatching(/^WRONGTYPE/),
    });
  });

  it("a fixed-window count is a plain integer that expires at the window end", async () => {
    await store.apply(0, [fw("enc:fw", 5, 2, { windowSeconds: 60 })]);
    const windowEndMs = (Math.floor(NOW_US / 60_000_000) * 60 + 60) * 1000;
    const key = windowKey("enc:fw", 60, NOW_US / 1000); // the window's parity names it: "enc:fw" or "enc:fw:1"
    expect(await client.get(key)).toBe("2");
    expect(await client.pexpiretime(key)).toBe(windowEndMs);
  });
});
