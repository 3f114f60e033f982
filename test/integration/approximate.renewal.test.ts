// A lease's renewal on a real redis-server, one instance, its local time on a manual clock (Redis TIME still
// decides the window): a lease used in its last interval gives back its unused units and takes the next lease
// in one script call, sized from the demand it saw; the store's count is then the admitted hits plus the new
// lease's units. A lease in steady use with ample room lives two intervals; unused in the first, it ends then
// with one call (a give-back only), as one used only by the request that took it does at its end. Near the
// limit the next lease lives one interval and shrinks.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { Leases } from "../../src/approximate/leases.js";
import type { FixedWindowCheck } from "../../src/counters/fixed_window/index.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { scriptCalls, startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { until } from "../helpers/wait.js";
import { getWindowCount } from "../helpers/window-key.js";

/** Long enough that a busy host does not reach the next interval's end before the test reads Redis. */
const INTERVAL_MS = 1000;

const open: { close(): Promise<void> | void }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

async function setup(capacity: number): Promise<{ redis: RedisProcess; leases: Leases; clock: ManualClock; check: FixedWindowCheck }> {
  const redis = await startRedis();
  open.push({ close: () => redis.stop() });
  // The window must not end during the test (a few seconds).
  await roomInWindow(60, 8, redisClock(redis));
  const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 5000, logger: pino({ level: "silent" }) });
  await store.start();
  // On a sweep step (10 ms): the sweep reaches a lease's end on the step the clock is set to.
  const clock = new ManualClock(Math.floor(Date.now() / 10) * 10_000);
  const leases = new Leases(store, { clock });
  open.push(store, { close: async () => void (await leases.close(5000)) });
  const check: FixedWindowCheck = { key: "sluice:{r:k=1}:fw60", algorithm: "fixed_window", capacity, windowSeconds: 60, hits: 1, shadow: false };
  return { redis, leases, clock, check };
}

async function allowed(leases: Leases, check: FixedWindowCheck): Promise<boolean> {
  const r = leases.decide([{ check, group: 0, intervalMs: INTERVAL_MS }], false)!;
  return (r instanceof Promise ? await r : r).answers[0]?.allowed === true;
}

const count = async (redis: RedisProcess, check: FixedWindowCheck) => Number(await getWindowCount(redis.cli, check.key));

describe("approximate lease renewal", () => {
  it("a lease used in its last interval: give-back and the next lease in one call; the store holds admitted + the new lease", async () => {
    const { redis, leases, clock, check } = await setup(5000);
    // The first lease: 1 + a tenth of 5,000 units; six hits from it, one store call.
    for (let i = 0; i < 6; i++) expect(await allowed(leases, check)).toBe(true);
    expect([leases.leasesTaken, leases.leasedUnits, await count(redis, check)]).toEqual([1, 495, 501]);
    await redis.cli("CONFIG", "RESETSTAT");
    // 10 ms before its end the sweep renews it: 6 hits in 990 ms, 2 intervals x 6.06 x 1.5 -> 19 units,
    // 19 <= a tenth of the room: two intervals.
    clock.advance(INTERVAL_MS - 10);
    await until(() => leases.leasesTaken === 2, 10_000, "the renewal");
    expect(await scriptCalls(redis)).toBe(1);
    expect(leases.unitsReturned).toBe(495);
    expect(leases.leasedUnits).toBe(19);
    expect(await count(redis, check)).toBe(6 + 19);
    // Used in its first interval, it lives a second: there it still answers with no call.
    clock.advance(INTERVAL_MS / 2);
    expect(await allowed(leases, check)).toBe(true);
    clock.advance(INTERVAL_MS / 2 + 5);
    for (let i = 0; i < 3; i++) expect(await allowed(leases, check)).toBe(true);
    expect(await scriptCalls(redis)).toBe(1);
    expect(await count(redis, check)).toBe(10 + leases.leasedUnits);
    await leases.close(5000);
    expect(await count(redis, check)).toBe(10);
    expect(await scriptCalls(redis)).toBe(2);
  });

  it("a request meeting a lease past its end before the sweep joins its renewal: still one call", async () => {
    const { redis, leases, clock, check } = await setup(5000);
    for (let i = 0; i < 6; i++) expect(await allowed(leases, check)).toBe(true);
    await redis.cli("CONFIG", "RESETSTAT");
    // At its end exactly, in the same turn (the sweep's timer cannot fire): 6 in 1,000 ms -> 18 units, plus the
    // request's 1.
    clock.advance(INTERVAL_MS);
    expect(await allowed(leases, check)).toBe(true);
    expect(await scriptCalls(redis)).toBe(1);
    expect([leases.leasesTaken, leases.unitsReturned, leases.leasedUnits]).toEqual([2, 495, 18]);
    expect(await count(redis, check)).toBe(7 + 18);
  });

  it("a two-interval lease unused in its first interval ends then: one call, a give-back only", async () => {
    const { redis, leases, clock, check } = await setup(5000);
    for (let i = 0; i < 6; i++) expect(await allowed(leases, check)).toBe(true);
    clock.advance(INTERVAL_MS - 10);
    await until(() => leases.leasesTaken === 2, 10_000, "the renewal");
    await redis.cli("CONFIG", "RESETSTAT");
    clock.advance(INTERVAL_MS);
    await until(() => leases.leasedUnits === 0 && leases.unitsReturned === 495 + 19, 10_000, "the give-back");
    await until(async () => (await count(redis, check)) === 6, 10_000, "the count back to the admitted hits");
    expect(await scriptCalls(redis)).toBe(1);
    expect(leases.leasesTaken).toBe(2);
  });

  it("a lease used only by the request that took it is not renewed: one call gives its units back", async () => {
    const { redis, leases, clock, check } = await setup(5000);
    expect(await allowed(leases, check)).toBe(true);
    await redis.cli("CONFIG", "RESETSTAT");
    clock.advance(INTERVAL_MS - 10);
    await until(() => leases.unitsReturned === 500, 10_000, "the give-back");
    expect([leases.leasesTaken, leases.leasedUnits, await scriptCalls(redis), await count(redis, check)]).toEqual([1, 0, 1, 1]);
  });

  it("near the limit the next lease lives one interval and shrinks to a tenth of the room", async () => {
    const { redis, leases, clock, check } = await setup(100);
    // The first lease: 1 + 10 units; six hits.
    for (let i = 0; i < 6; i++) expect(await allowed(leases, check)).toBe(true);
    expect(await count(redis, check)).toBe(11);
    await redis.cli("CONFIG", "RESETSTAT");
    // Two intervals would be 19 units, over a tenth of the room (89 + 5 back): one interval of 6.06 x 1.5 -> 10,
    // at most 9.
    clock.advance(INTERVAL_MS - 10);
    await until(() => leases.leasesTaken === 2, 10_000, "the renewal");
    expect(await scriptCalls(redis)).toBe(1);
    expect(leases.leasedUnits).toBe(9);
    expect(await count(redis, check)).toBe(6 + 9);
    // Used in its one interval, its renewal comes at that interval's end, not a second one's.
    expect(await allowed(leases, check)).toBe(true);
    clock.advance(INTERVAL_MS - 10);
    await until(() => leases.leasesTaken === 3, 10_000, "the second renewal");
    expect(await scriptCalls(redis)).toBe(2);
    expect(await count(redis, check)).toBe(7 + leases.leasedUnits);
  });
});
