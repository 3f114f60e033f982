// Every store key expires: after a mixed workload against a real Redis, SCAN finds no key without a
// TTL, and none whose TTL is longer than its rule's window (fixed window) or fill time (token bucket).
import { isSummaryKey } from "../../src/insight/windows.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OVER_LIMIT, rlsClient, type RlsClient, type WireDescriptor } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";
import { windowBaseKey } from "../helpers/window-key.js";

const RULES = `
domain: ttl
descriptors:
  - key: sec
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: min
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: hour
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: day
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: week
    rate_limit: {unit: week, requests_per_unit: 3}
  - key: month
    rate_limit: {unit: month, requests_per_unit: 3}
  - key: year
    rate_limit: {unit: year, requests_per_unit: 3}
  - key: tb_fast
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
  - key: tb_slow
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: token_bucket, burst: 10}
  - key: tb_default
    rate_limit: {unit: minute, requests_per_unit: 6, algorithm: token_bucket}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: tenant
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2}
      - key: path
        value: "/api/*"
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: free
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: quota_day
    quota: {period: day, limit: 5}
  - key: plan
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket}
    quota: {period: month, limit: 100}
`;

/** Longest TTL a token bucket key may have: the time to fill from empty, burst / (rate per second). */
const BUCKET_FILL_MS: Record<string, number> = {
  tb_fast: 2_000, // 20 / 10 per s
  tb_slow: 360_000, // 10 / (100 per 3600 s)
  tb_default: 60_000, // 6 / (6 per 60 s)
  plan: 1_000, // 5 / 5 per s
};

/**
 * The longest TTL allowed for a store key, from its algorithm tag (docs/rules.md "Store keys").
 * Quota keys: up to the end of their calendar period (UTC).
 */
function maxTtlMs(key: string): number {
  const quota = /:q:(\d{4})-(\d{2})(?:-(\d{2}))?$/.exec(key);
  if (quota) {
    const [y, m, d] = [Number(quota[1]), Number(quota[2]) - 1, quota[3] ? Number(quota[3]) : undefined];
    const end = d === undefined ? Date.UTC(y, m + 1, 1) : Date.UTC(y, m, d + 1);
    return end - Date.now() + 1000;
  }
  const tag = key.slice(key.lastIndexOf(":") + 1);
  const fw = /^fw(\d+)$/.exec(tag);
  if (fw) return Number(fw[1]) * 1000;
  if (tag === "tb") {
    const firstEntryKey = key.split(":")[2].split("=")[0];
    const fill = BUCKET_FILL_MS[firstEntryKey.replace(/^\{ttl$/, "")];
    if (fill === undefined) throw new Error(`token bucket key of no known rule: ${key}`);
    return fill;
  }
  throw new Error(`store key of unknown kind (add its TTL rule to this test): ${key}`);
}

let redis: RedisProcess;
let sluice: SluiceProcess;
let client: RlsClient;

beforeAll(async () => {
  redis = await startRedis();
  sluice = await startSluice(["--config", ruleDir({ "rules.yaml": RULES }), "--redis", redis.url], {
    SLUICE_STORE_TIMEOUT_MS: "2000",
  });
  client = rlsClient(sluice.port);
});
afterAll(async () => {
  client?.close();
  await sluice?.stop();
  await redis?.stop();
});

/** Every counter key, by SCAN (redis-cli --scan prints one key per line); refusal summaries (docs/top.md) apart. */
async function scanAll(): Promise<string[]> {
  return (await redis.cli("--scan")).split("\n").filter((k) => k !== "" && !isSummaryKey(k));
}

describe("TTL scan", () => {
  it("after a mixed workload every key has a TTL, none longer than its rule allows", async () => {
    // The workload must not straddle an hour (so also day, week, month, year) boundary: an exhausted
    // hour that resets halfway would let the all-or-nothing requests through.
    await roomInWindow(3600, 60, redisClock(redis));
    const d = (entries: Record<string, string> | [string, string][], extra: Partial<WireDescriptor> = {}) => descriptor(entries, extra);
    let refused = 0;
    const send = async (descriptors: WireDescriptor[], hits_addend?: number) => {
      const r = await client.shouldRateLimit({ domain: "ttl", descriptors, hits_addend });
      if (r.overall_code === OVER_LIMIT) refused++;
    };
    await send([d({ hour: "exhausted" }, { hits_addend: { value: 3 } })]);
    for (let i = 0; i < 12; i++) {
      const who = `client${i % 4}`;
      await send([d({ sec: who }), d({ min: who })]);
      await send([d({ hour: who }), d({ day: who }), d({ week: who })]);
      await send([d({ month: who }), d({ year: who })]);
      await send([d({ tb_fast: who }, { hits_addend: { value: 3 } })]);
      await send([d({ tb_slow: who }), d({ tb_default: who })]);
      await send([d({ shadow: who })]);
      await send([
        d([
          ["tenant", "t1"],
          ["user", who],
        ]),
      ]);
      await send([
        d([
          ["tenant", "t1"],
          ["path", `/api/${i}`],
        ]),
      ]);
      await send([d({ free: who }), d({ blocked: who })]);
      await send([d({ quota_day: who })]);
      await send([d({ plan: who })]);
      // Check-only calls never create a key; an override counts under its own unit.
      await send([d({ hour: `peek${i}` }, { hits_addend: { value: 0 } })]);
      await send([d({ anything: who }, { limit: { requests_per_unit: 4, unit: 2 } })]);
      // A request refused by one limit (here an exhausted hour) consumes nothing from the others.
      await send([d({ min: `all-or-nothing${i % 2}` }), d({ hour: "exhausted" })]);
    }
    await send([d({ sec: "peek" })], 0);
    expect(refused).toBeGreaterThan(10);

    let keys = await scanAll();
    // A 1 s window's key ends with its second: on a slow host it can be gone before the scan. Then make one
    // again with at least half a second left and scan at once, until one is seen.
    for (let attempt = 0; attempt < 5 && !keys.some((k) => windowBaseKey(k).endsWith("}:fw1")); attempt++) {
      await roomInWindow(1, 0.5, redisClock(redis));
      await send([d({ sec: "peek" })], 0);
      keys = await scanAll();
    }
    expect(keys.length).toBeGreaterThan(40);
    // Check-only, refused, unlimited and blocked requests left no key behind (the one request-level
    // hits_addend 0 means 1 and did count).
    const noKey = keys.filter((k) => /peek|all-or-nothing|blocked|free/.test(k));
    expect(noKey.filter((k) => windowBaseKey(k) !== "sluice:{ttl:sec=peek}:fw1")).toEqual([]);
    expect(keys.filter((k) => k.includes(":q:")).sort()).toEqual(
      [0, 1, 2, 3].flatMap((i) => [`sluice:{ttl:plan=client${i}}:q:${month()}`, `sluice:{ttl:quota_day=client${i}}:q:${day()}`]).sort(),
    );

    const bad: string[] = [];
    for (const key of keys) {
      const pttl = Number((await redis.cli("PTTL", key)).trim());
      const max = maxTtlMs(windowBaseKey(key));
      // -2: gone since the scan (a 1 s window ended); fine. -1: no TTL: never allowed.
      if (pttl === -2) continue;
      if (!(pttl > 0 && pttl <= max)) bad.push(`${key}: PTTL ${pttl}, allowed 1..${max}`);
    }
    expect(bad).toEqual([]);

    // The refusal summaries expire too: 8 buckets of their window at most.
    // Sent within a second of the refusals: waited for.
    let summaries: string[] = [];
    for (const deadline = Date.now() + 5000; summaries.length === 0 && Date.now() < deadline; await sleep(50)) {
      summaries = (await redis.cli("--scan")).split("\n").filter(isSummaryKey);
    }
    expect(summaries.length).toBeGreaterThan(0);
    for (const key of summaries) {
      const pttl = Number((await redis.cli("PTTL", key)).trim());
      expect(pttl > 0 && pttl <= (key.includes(":1m:") ? 80_000 : 4_800_000), `${key}: PTTL ${pttl}`).toBe(true);
    }

    // Every kind of key was there to check.
    const tags = new Set(
      keys.map((k) =>
        windowBaseKey(k)
          .slice(k.indexOf("}:") + 2)
          .replace(/^q:\d{4}-\d{2}-\d{2}$/, "q:day")
          .replace(/^q:\d{4}-\d{2}$/, "q:month"),
      ),
    );
    expect([...tags].sort()).toEqual(["fw1", "fw2592000", "fw31536000", "fw3600", "fw60", "fw604800", "fw86400", "q:day", "q:month", "tb"]);

    // Redis's own count agrees: as many keys with an expiry as keys.
    const keyspace = /db0:keys=(\d+),expires=(\d+)/.exec(await redis.cli("INFO", "keyspace"));
    expect(keyspace).not.toBeNull();
    expect(keyspace![2]).toBe(keyspace![1]);
  }, 120_000);
});

/** The current UTC month and day as quota keys name them. */
const month = () => new Date().toISOString().slice(0, 7);
const day = () => new Date().toISOString().slice(0, 10);
