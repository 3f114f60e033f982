// Store keys stay short whatever the client sends: values longer than a threshold are hashed in the
// key, and two different long values still keep separate counters.
// DEPENDS ON the lead's long-value hashing in src/core/keys.ts: fails until that lands.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";

const RULES = `
domain: ks
descriptors:
  - key: long
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: tenant
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket}
`;

let redis: RedisProcess;
let sluice: SluiceProcess;
let client: RlsClient;

beforeAll(async () => {
  redis = await startRedis();
  sluice = await startSluice(["--config", ruleDir({ "rules.yaml": RULES }), "--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "2000" });
  client = rlsClient(sluice.port);
});
afterAll(async () => {
  client?.close();
  await sluice?.stop();
  await redis?.stop();
});

const call = (entries: [string, string][]) => client.shouldRateLimit({ domain: "ks", descriptors: [descriptor(entries)] });

describe("store key size", () => {
  it("10 KiB values give keys under 300 bytes, and values differing in one character keep separate counters", async () => {
    const a = "a".repeat(10_240);
    const b = "a".repeat(10_239) + "b";
    const c = "b" + "a".repeat(10_239);
    expect((await call([["long", a]])).overall_code).toBe(OK);
    expect((await call([["long", b]])).overall_code).toBe(OK);
    expect((await call([["long", c]])).overall_code).toBe(OK);
    expect((await call([["long", a]])).overall_code).toBe(OVER_LIMIT);
    expect(
      (
        await call([
          ["tenant", a],
          ["user", b],
        ])
      ).overall_code,
    ).toBe(OK);
    expect(
      (
        await call([
          ["tenant", b],
          ["user", a],
        ])
      ).overall_code,
    ).toBe(OK);
    expect(
      (
        await call([
          ["tenant", a],
          ["user", b],
        ])
      ).overall_code,
    ).toBe(OVER_LIMIT);

    const keys = (await redis.cli("--scan")).trim().split("\n").filter(Boolean);
    expect(keys.length).toBe(5);
    const lengths = keys.map((k) => Buffer.byteLength(k));
    expect(Math.max(...lengths)).toBeLessThan(300);
  });

  it("values at 256 characters and one over both work and stay distinct", async () => {
    const v256 = "x".repeat(256);
    const v257 = "x".repeat(257);
    expect((await call([["long", v256]])).overall_code).toBe(OK);
    expect((await call([["long", v257]])).overall_code).toBe(OK);
    expect((await call([["long", v256]])).overall_code).toBe(OVER_LIMIT);
    expect((await call([["long", v257]])).overall_code).toBe(OVER_LIMIT);
  });
});
