// Quotas and several limits per descriptor, decided by the limiter on a real redis-server. The time
// of both the limiter and the scripts is pinned through the clock seam (RedisStore's `clock` pins the
// scripts' time instead of Redis TIME), so period boundaries are crossed without waiting.
// Pinned dates are in the future: Redis really expires a key whose PEXPIREAT time has passed.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import { Limiter } from "../../src/limiter/limiter.js";
import { toWireResponse } from "../../src/server/grpc/wire-response.js";
import type { Decision } from "../../src/limiter/types.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { windowKey } from "../helpers/window-key.js";

const RULES = `
domain: q
descriptors:
  # A rate limit and a daily quota on one key, at a test-friendly scale: 5 per second and 12 per day.
  - key: client
    rate_limit: {unit: second, requests_per_unit: 5, name: per_second}
    quota: {period: day, limit: 12, name: daily}
  # Two rate limits on one descriptor.
  - key: user
    rate_limits:
      - {unit: second, requests_per_unit: 3, name: per_second}
      - {unit: minute, requests_per_unit: 5, name: per_minute}
  - key: monthly
    quota: {period: month, limit: 3}
  - key: daily
    quota: {period: day, limit: 2}
  # A token bucket next to a monthly quota, as a paid plan would have.
  - key: plan
    rate_limit: {unit: second, requests_per_unit: 20, algorithm: token_bucket}
    quota: {period: month, limit: 1000000}
`;

const rules = loadRuleFiles([{ name: "q.yaml", text: RULES }], { mergeDomains: false }).rules!;
const silent = pino({ level: "silent" });
const at = (iso: string) => Date.parse(iso) * 1000;

let redis: RedisProcess;
let stores: RedisStore[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterEach(async () => {
  for (const s of stores) await s.close();
  stores = [];
  await redis.cli("FLUSHALL");
});
afterAll(async () => {
  await redis?.stop();
});

/** A limiter and its store on pinned clocks: one clock, or a store clock of its own (skew). */
async function limiterAt(iso: string, storeIso?: string) {
  const clock = new ManualClock(at(iso));
  const store = new RedisStore({
    servers: [{ host: "127.0.0.1", port: redis.port }],
    timeoutMs: 5000,
    logger: silent,
    clock: storeIso ? new ManualClock(at(storeIso)) : clock,
  });
  await store.start();
  stores.push(store);
  const limiter = new Limiter(rules, store, { clock, denyNoteMaxEntries: 0 });
  const call = (key: string, value: string) => limiter.shouldRateLimit({ domain: "q", descriptors: [{ entries: [{ key, value }] }], hitsAddend: 0 });
  return { clock, call };
}

const body = (d: Decision) => JSON.parse(toWireResponse(d).raw_body!.toString());
const get = async (key: string) => (await redis.cli("GET", key)).trim();

describe("a rate limit and a daily quota on one key", () => {
  it("full speed: the rate limit refuses within each second, the quota once Q is spent; counters are exact", async () => {
    const { clock, call } = await limiterAt("2027-03-10T10:00:00.000Z");
    const allowedPerSecond: number[] = [];
    const refusedBy: string[][] = [];
    for (let s = 0; s < 5; s++) {
      let allowed = 0;
      const by: string[] = [];
      for (let i = 0; i < 10; i++) {
        const d = await call("client", "c1");
        if (d.code === "OK") allowed++;
        else by.push(d.statuses[0].limit!.name);
        clock.advance(100);
      }
      allowedPerSecond.push(allowed);
      refusedBy.push([...new Set(by)]);
      if (s === 0) {
        // Refused requests spent nothing: 5 allowed, 5 counted in each counter.
        expect(await get("sluice:{q:client=c1}:q:2027-03-10")).toBe("5");
        expect(await get(windowKey("sluice:{q:client=c1}:fw1", 1, Date.parse("2027-03-10T10:00:00Z")))).toBe("5");
      }
    }
    expect(allowedPerSecond).toEqual([5, 5, 2, 0, 0]);
    expect(refusedBy).toEqual([["per_second"], ["per_second"], ["daily"], ["daily"], ["daily"]]);
    // The quota counter equals exactly the number of requests allowed.
    expect(await get("sluice:{q:client=c1}:q:2027-03-10")).toBe("12");
    // Quota refusals spent nothing from the rate limit: its counter was last written in second 2.
    const second2 = windowKey("sluice:{q:client=c1}:fw1", 1, Date.parse("2027-03-10T10:00:02Z"));
    expect(await get(second2)).toBe("2");
    expect(Number(await redis.cli("PEXPIRETIME", second2))).toBe(Date.parse("2027-03-10T10:00:03Z"));
    expect(Number(await redis.cli("PEXPIRETIME", "sluice:{q:client=c1}:q:2027-03-10"))).toBe(Date.parse("2027-03-11T00:00:00Z"));
  });

  it("an exhausted quota answers with when it resets (ISO 8601) and Retry-After until then; the status reports the quota", async () => {
    const { clock, call } = await limiterAt("2027-03-10T22:00:00.000Z");
    for (let i = 0; i < 12; i++) {
      expect((await call("client", "c2")).code).toBe("OK");
      clock.advance(1000);
    }
    const d = await call("client", "c2");
    expect(d.code).toBe("OVER_LIMIT");
    const secondsLeft = Math.ceil((Date.parse("2027-03-11T00:00:00Z") - clock.nowMicros() / 1000) / 1000);
    expect(d.retryAfterSeconds).toBe(secondsLeft);
    expect(body(d)).toEqual({ error: "quota_exhausted", quota_resets_at: "2027-03-11T00:00:00Z", retry_after_seconds: secondsLeft });
    const w = toWireResponse(d);
    expect(w.response_headers_to_add).toContainEqual({ key: "Retry-After", value: String(secondsLeft) });
    expect(w.statuses[0]).toEqual({
      code: 2,
      current_limit: { name: "daily", requests_per_unit: 12, unit: 4 },
      limit_remaining: 0,
      duration_until_reset: { seconds: secondsLeft, nanos: 0 },
    });
  });

  it("while only the rate limit refuses, the body says rate_limited with its Retry-After", async () => {
    const { call } = await limiterAt("2027-03-10T10:00:00.250Z");
    for (let i = 0; i < 5; i++) expect((await call("client", "c3")).code).toBe("OK");
    const d = await call("client", "c3");
    expect(body(d)).toEqual({ error: "rate_limited", retry_after_seconds: 1 });
    expect(d.statuses[0].limit!.name).toBe("per_second");
    expect(d.statuses[0].remaining).toBe(0);
  });
});

describe("two rate limits on one descriptor", () => {
  it("both are enforced and the status names the one that refused", async () => {
    const { clock, call } = await limiterAt("2027-03-10T10:00:00.000Z");
    const seq: string[] = [];
    const record = async () => {
      const d = await call("user", "u1");
      seq.push(d.code === "OK" ? `ok:${d.statuses[0].limit!.name}:${d.statuses[0].remaining}` : `over:${d.statuses[0].limit!.name}`);
    };
    for (let i = 0; i < 4; i++) await record(); // second 0: 3 pass, the 4th meets per_second
    clock.advance(1000);
    for (let i = 0; i < 3; i++) await record(); // second 1: 2 pass (5 in the minute), then per_minute refuses
    expect(seq).toEqual(["ok:per_second:2", "ok:per_second:1", "ok:per_second:0", "over:per_second", "ok:per_minute:1", "ok:per_minute:0", "over:per_minute"]);
    const nowMs = clock.nowMicros() / 1000; // second 1, in the first minute
    expect(await get(windowKey("sluice:{q:user=u1}:fw60", 60, nowMs))).toBe("5");
    expect(await get(windowKey("sluice:{q:user=u1}:fw1", 1, nowMs))).toBe("2");
  });
});

describe("calendar rollover at the boundary, by the store's clock", () => {
  it("month: 31 January 23:59:59.9 UTC -> 1 February", async () => {
    const { clock, call } = await limiterAt("2027-01-31T23:59:59.900Z");
    for (let i = 0; i < 3; i++) expect((await call("monthly", "m")).code).toBe("OK");
    const refused = await call("monthly", "m");
    expect(body(refused)).toEqual({ error: "quota_exhausted", quota_resets_at: "2027-02-01T00:00:00Z", retry_after_seconds: 1 });
    clock.advance(100);
    const feb = await call("monthly", "m");
    expect(feb.code).toBe("OK");
    expect(feb.statuses[0].remaining).toBe(2);
    expect(await get("sluice:{q:monthly=m}:q:2027-01")).toBe("3");
    expect(await get("sluice:{q:monthly=m}:q:2027-02")).toBe("1");
    expect(Number(await redis.cli("PEXPIRETIME", "sluice:{q:monthly=m}:q:2027-02"))).toBe(Date.parse("2027-03-01T00:00:00Z"));
  });

  it("leap year: 28 February -> 29 February (day), 29 February -> 1 March (month and day)", async () => {
    const { clock, call } = await limiterAt("2028-02-28T23:59:59.900Z");
    expect((await call("daily", "d")).code).toBe("OK");
    expect((await call("daily", "d")).code).toBe("OK");
    expect(body(await call("daily", "d")).quota_resets_at).toBe("2028-02-29T00:00:00Z");
    clock.advance(100);
    expect((await call("daily", "d")).statuses[0].remaining).toBe(1);
    expect(await get("sluice:{q:daily=d}:q:2028-02-29")).toBe("1");

    clock.set(at("2028-02-29T23:59:59.999Z"));
    for (let i = 0; i < 3; i++) expect((await call("monthly", "leap")).code).toBe("OK");
    expect((await call("daily", "d")).code).toBe("OK");
    expect(body(await call("daily", "d")).quota_resets_at).toBe("2028-03-01T00:00:00Z");
    expect(body(await call("monthly", "leap")).quota_resets_at).toBe("2028-03-01T00:00:00Z");
    clock.advance(1);
    expect((await call("monthly", "leap")).code).toBe("OK");
    expect((await call("daily", "d")).code).toBe("OK");
    expect(await get("sluice:{q:monthly=leap}:q:2028-02")).toBe("3");
    expect(await get("sluice:{q:monthly=leap}:q:2028-03")).toBe("1");
    expect(await get("sluice:{q:daily=d}:q:2028-02-29")).toBe("2");
    expect(await get("sluice:{q:daily=d}:q:2028-03-01")).toBe("1");
  });

  it("the store's clock picks the period, not the app server's: a skewed app still counts in the right month", async () => {
    // The store is already in February while this app server's clock still says January.
    const { call } = await limiterAt("2027-01-31T23:59:58.000Z", "2027-02-01T00:00:02.000Z");
    expect((await call("monthly", "skew")).code).toBe("OK");
    expect(await redis.cli("EXISTS", "sluice:{q:monthly=skew}:q:2027-01")).toBe("0\n");
    expect(await get("sluice:{q:monthly=skew}:q:2027-02")).toBe("1");
  });
});

describe("a plan: token bucket and monthly quota", () => {
  it("refusals by the bucket spend no quota", async () => {
    const { call } = await limiterAt("2027-05-01T12:00:00.000Z");
    const answers = [];
    for (let i = 0; i < 25; i++) answers.push(await call("plan", "pro-1"));
    expect(answers.filter((d) => d.code === "OK")).toHaveLength(20);
    expect(await get("sluice:{q:plan=pro-1}:q:2027-05")).toBe("20");
    const refused = answers.find((d) => d.code === "OVER_LIMIT")!;
    expect(body(refused)).toEqual({ error: "rate_limited", retry_after_seconds: 1 });
    // The status of an allowed request reports the tighter of the two: the bucket's 20, not the quota's 999,980.
    expect(answers[19].statuses[0]).toEqual(expect.objectContaining({ code: "OK", remaining: 0 }));
    expect(answers[19].statuses[0].limit!.algorithm).toBe("token_bucket");
  });
});
