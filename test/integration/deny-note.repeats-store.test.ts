// The deny note only repeats what the store said, in four cases where it could say more than the store, each
// through real gRPC against `sluice serve` on a real Redis, and compared with what Redis holds.
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, retryAfter, rlsClient, type RlsClient, type WireRequest } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

const TRUTH = `domain: truth
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: bucket
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: token_bucket}
  - key: paying
    quota: {period: month, limit: 5}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: slow_bucket
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket, burst: 3}
`;
// envoyproxy/ratelimit's integration-test config "another".
const ANOTHER = `domain: another
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 10}
`;
const reloadRules = (perHour: number) => `domain: reload
descriptors:
  - key: r
    rate_limit: {unit: hour, requests_per_unit: ${perHour}}
`;

let redis: RedisProcess;
let sluice: SluiceProcess;
let client: RlsClient;
let dir: string;
const MINUTE = 2;

beforeAll(async () => {
  redis = await startRedis();
  dir = ruleDir({ "truth.yaml": TRUTH, "another.yaml": ANOTHER, "reload.yaml": reloadRules(1) });
  // A generous store timeout: case 3 holds a call in a paused Redis on purpose.
  sluice = await startSluice(["--config", dir, "--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "10000", SLUICE_RELOAD_INTERVAL_S: "0" });
  client = rlsClient(sluice.port);
  // The cases count in minute and hour windows: start well inside both (the file runs in about a second).
  await roomInWindow(3600, 10, redisClock(redis));
  await roomInWindow(60, 5, redisClock(redis));
});

afterAll(async () => {
  client?.close();
  await sluice?.stop();
  await redis?.stop();
});

const one = (domain: string, key: string, value: string): WireRequest => ({ domain, descriptors: [descriptor({ [key]: value })] });

describe("1. the same descriptor twice in one request", () => {
  for (const [key, what] of [
    ["client", "fixed window"],
    ["bucket", "token bucket"],
    ["paying", "monthly quota"],
  ] as const) {
    it(`${what}: refused as a pair, then one hit passes (4 of 5 used)`, async () => {
      for (let i = 0; i < 4; i++) expect((await client.shouldRateLimit(one("truth", key, "a"))).overall_code).toBe(OK);
      const pair = await client.shouldRateLimit({ domain: "truth", descriptors: [descriptor({ [key]: "a" }), descriptor({ [key]: "a" })] });
      expect(pair.overall_code).toBe(OVER_LIMIT);
      const single = await client.shouldRateLimit(one("truth", key, "a"));
      expect(single.overall_code).toBe(OK);
      expect(single.statuses[0].limit_remaining).toBe(0);
      expect((await client.shouldRateLimit(one("truth", key, "a"))).overall_code).toBe(OVER_LIMIT);
    });
  }
});

describe("2. a limit override's refusal", () => {
  it("does not block the configured rule on the same key", async () => {
    const override = { domain: "truth", descriptors: [descriptor({ user: "u" }, { limit: { requests_per_unit: 2, unit: MINUTE } })] };
    expect((await client.shouldRateLimit(override)).overall_code).toBe(OK);
    expect((await client.shouldRateLimit(override)).overall_code).toBe(OK);
    expect((await client.shouldRateLimit(override)).overall_code).toBe(OVER_LIMIT);
    const rule = await client.shouldRateLimit(one("truth", "user", "u"));
    expect(rule.overall_code).toBe(OK);
    expect(rule.statuses[0].limit_remaining).toBe(97);
    expect(rule.statuses[0].current_limit?.requests_per_unit).toBe(100);
  });
});

describe("3. a note learnt by a call in flight across a reload", () => {
  it("is not used under the new rules", async () => {
    expect((await client.shouldRateLimit(one("reload", "r", "x"))).overall_code).toBe(OK);
    // WRITE, not ALL: scripts are held (they may write) while redis-cli can still see them held.
    await redis.cli("CLIENT", "PAUSE", "10000", "WRITE");
    const held = client.shouldRateLimit(one("reload", "r", "x"));
    await until(async () => (await redis.cli("INFO", "clients")).includes("blocked_clients:1"));
    fs.writeFileSync(path.join(dir, "reload.yaml"), reloadRules(100));
    await sluice.waitForLog((l) => l.msg === "rules reloaded");
    await redis.cli("CLIENT", "UNPAUSE");
    const answer = await held;
    expect(answer.overall_code).toBe(OVER_LIMIT); // decided under the rules it was planned with
    expect(answer.statuses[0].current_limit?.requests_per_unit).toBe(1);
    const after = await client.shouldRateLimit(one("reload", "r", "x"));
    expect(after.overall_code).toBe(OK);
    expect(after.statuses[0].current_limit?.requests_per_unit).toBe(100);
    expect(after.statuses[0].limit_remaining).toBe(98);
  });
});

describe("4. answers while a note refuses carry the store's figures", () => {
  it("envoyproxy/ratelimit's sequence: key3 refuses from the 11th call, key2's status says what Redis holds", async () => {
    const req: WireRequest = { domain: "another", descriptors: [descriptor({ key2: "r" }), descriptor({ key3: "r" })] };
    for (let i = 1; i <= 15; i++) {
      const res = await client.shouldRateLimit(req);
      if (i <= 10) {
        expect(res.overall_code).toBe(OK);
        expect(res.statuses.map((s) => s.limit_remaining)).toEqual([20 - i, 10 - i]);
        continue;
      }
      expect(res.overall_code).toBe(OVER_LIMIT);
      expect(res.statuses.map((s) => s.code)).toEqual([OK, OVER_LIMIT]);
      expect(res.statuses.map((s) => s.limit_remaining)).toEqual([10, 0]);
      expect(res.statuses[0].duration_until_reset?.seconds).toBeGreaterThan(0);
      expect(res.statuses[0].duration_until_reset?.seconds).toBeLessThanOrEqual(60);
    }
    const keys = (await redis.cli("--scan", "--pattern", "sluice:{another:key2=r}:*")).trim().split("\n");
    expect(keys).toHaveLength(1);
    expect((await redis.cli("GET", keys[0])).trim()).toBe("10");
  });

  it("a token bucket refused from the note reports the store's time to full, not its Retry-After", async () => {
    const req = one("truth", "slow_bucket", "s");
    for (let i = 0; i < 3; i++) expect((await client.shouldRateLimit(req)).overall_code).toBe(OK);
    const fromStore = await client.shouldRateLimit(req);
    expect(fromStore.overall_code).toBe(OVER_LIMIT);
    const fromNote = await client.shouldRateLimit(req);
    expect(fromNote.overall_code).toBe(OVER_LIMIT);
    for (const res of [fromStore, fromNote]) {
      expect(res.statuses[0].limit_remaining).toBe(0);
      // Empty bucket of 3 at 1 per hour: full in 3 hours; one token back in 1 hour.
      expect(Math.abs(Number(res.statuses[0].duration_until_reset?.seconds) - 10_800)).toBeLessThanOrEqual(1);
      expect(Math.abs(Number(retryAfter(res)) - 3600)).toBeLessThanOrEqual(1);
    }
  });
});
