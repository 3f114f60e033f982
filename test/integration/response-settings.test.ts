// Real `sluice serve` processes on a real Redis, over real gRPC: the reference's RateLimit-* headers
// and dynamic_metadata turned on by the reference's variables and by sluice's own, the near-limit
// ratio seen through /metrics, global shadow mode's counter, and quota_mode in GET /rules.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient, type WireResponse } from "../helpers/grpc-client.js";
import { sampleValue, scrape } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";

// Token buckets over a day: no window boundary falls inside the test, so remaining and counts are exact.
const RULES = `
domain: ans
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 10, algorithm: token_bucket}
    metadata: {plan: {name: gold}, team: edge}
  - key: ip
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}
    metadata: {plan: {tier: 2}, team: other}
  - key: q
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 5, algorithm: token_bucket}
`;

/** google.protobuf.Struct as proto-loader hands it over (oneofs: true) -> a plain object. */
function plain(v: any): unknown {
  if (v && typeof v === "object" && "fields" in v) return Object.fromEntries(Object.entries(v.fields).map(([k, x]) => [k, plain(x)]));
  if (v && typeof v === "object" && "kind" in v) {
    if (v.kind === "structValue") return plain(v.structValue);
    if (v.kind === "listValue") return (v.listValue.values ?? []).map(plain);
    return v[v.kind];
  }
  return v;
}

const resetOf = (res: WireResponse, i: number) => String(res.statuses[i].duration_until_reset!.seconds);

describe("answers with the reference's variables: headers with custom names, reference metadata, NEAR_LIMIT_RATIO", () => {
  let redis: RedisProcess;
  let sluice: SluiceProcess;
  let client: RlsClient;

  beforeAll(async () => {
    redis = await startRedis();
    sluice = await startSluice(["--config", ruleDir({ "ans.yaml": RULES }), "--redis", redis.url], {
      LIMIT_RESPONSE_HEADERS_ENABLED: "true",
      LIMIT_LIMIT_HEADER: "X-RL-Limit",
      LIMIT_REMAINING_HEADER: "X-RL-Remaining",
      LIMIT_RESET_HEADER: "X-RL-Reset",
      RESPONSE_DYNAMIC_METADATA: "true",
      NEAR_LIMIT_RATIO: "0.5",
      SLUICE_STORE_TIMEOUT_MS: "2000", // exact counts on a loaded box
    });
    client = rlsClient(sluice.port);
  });

  afterAll(async () => {
    client?.close();
    await sluice?.stop();
    await redis?.stop();
  });

  it("an OK answer carries the three headers of the status with the least left", async () => {
    const res = await client.shouldRateLimit({ domain: "ans", descriptors: [descriptor({ ip: "1" }), descriptor({ user: "a" })] });
    expect(res.overall_code).toBe(OK);
    expect(res.statuses.map((s) => s.limit_remaining)).toEqual([99, 9]);
    expect(Number(resetOf(res, 1))).toBeGreaterThan(0);
    expect(res.response_headers_to_add).toEqual([
      { key: "X-RL-Limit", value: "10" },
      { key: "X-RL-Remaining", value: "9" },
      { key: "X-RL-Reset", value: resetOf(res, 1) },
    ]);
    expect(plain(res.dynamic_metadata)).toEqual({
      domain: "ans",
      descriptors: [{ entries: ["ip=1"] }, { entries: ["user=a"] }],
      metadata: { plan: { tier: 2, name: "gold" }, team: "other" },
    });
  });

  it("a refusal carries them after Retry-After; the refused descriptor's metadata is left out", async () => {
    const fill = await client.shouldRateLimit({ domain: "ans", descriptors: [descriptor({ user: "b" }, { hits_addend: { value: 10 } })] });
    expect(fill.overall_code).toBe(OK);
    const res = await client.shouldRateLimit({ domain: "ans", descriptors: [descriptor({ user: "b" }), descriptor({ ip: "2" })], hits_addend: 1 });
    expect(res.overall_code).toBe(OVER_LIMIT);
    const headers = res.response_headers_to_add!;
    expect(headers.map((h) => h.key)).toEqual(["content-type", "Retry-After", "X-RL-Limit", "X-RL-Remaining", "X-RL-Reset"]);
    expect(headers.slice(2)).toEqual([
      { key: "X-RL-Limit", value: "10" },
      { key: "X-RL-Remaining", value: "0" },
      { key: "X-RL-Reset", value: resetOf(res, 0) },
    ]);
    expect(plain(res.dynamic_metadata)).toEqual({
      domain: "ans",
      descriptors: [{ entries: ["user=b"] }, { entries: ["ip=2"] }],
      hitsAddend: 1,
      metadata: { plan: { tier: 2 }, team: "other" },
    });
  });

  it("near_limit counts hits past floor(10 x 0.5) = 5 in /metrics", async () => {
    for (let i = 0; i < 7; i++) expect((await client.shouldRateLimit({ domain: "ans", descriptors: [descriptor({ user: "n" })] })).overall_code).toBe(OK);
    const samples = await scrape(sluice.adminPort);
    // user=a 1 hit, user=b 10 (near: 6..10) + 1 refused, user=n 7 (near: 6, 7).
    const labels = { domain: "ans", rule: "ans.user", limit: "rate_limit" };
    expect(sampleValue(samples, "sluice_rule_hits_total", labels)).toBe(19);
    expect(sampleValue(samples, "sluice_rule_near_limit_total", labels)).toBe(7);
    expect(sampleValue(samples, "sluice_rule_over_limit_total", labels)).toBe(1);
    expect(sampleValue(samples, "sluice_global_shadow_mode_total", { domain: "ans" })).toBe(0);
  });
});

describe("answers with sluice's own settings: default header names, global shadow mode counted, quota_mode in /rules", () => {
  let redis: RedisProcess;
  let sluice: SluiceProcess;
  let client: RlsClient;

  beforeAll(async () => {
    redis = await startRedis();
    sluice = await startSluice(["--config", ruleDir({ "ans.yaml": RULES }), "--redis", redis.url], {
      SLUICE_RESPONSE_HEADERS: "true",
      SLUICE_RESPONSE_DYNAMIC_METADATA: "off",
      SHADOW_MODE: "true",
      SLUICE_STORE_TIMEOUT_MS: "2000",
    });
    client = rlsClient(sluice.port);
  });

  afterAll(async () => {
    client?.close();
    await sluice?.stop();
    await redis?.stop();
  });

  it("global shadow mode answers OK with the refusing status's headers and counts it", async () => {
    const first = await client.shouldRateLimit({ domain: "ans", descriptors: [descriptor({ user: "s" }, { hits_addend: { value: 10 } })] });
    expect(first.response_headers_to_add).toEqual([
      { key: "RateLimit-Limit", value: "10" },
      { key: "RateLimit-Remaining", value: "0" },
      { key: "RateLimit-Reset", value: resetOf(first, 0) },
    ]);
    expect(first.dynamic_metadata ?? undefined).toBeUndefined();
    const res = await client.shouldRateLimit({ domain: "ans", descriptors: [descriptor({ user: "s" })] });
    expect(res.overall_code).toBe(OK);
    expect(res.statuses[0].code).toBe(OVER_LIMIT);
    expect(res.response_headers_to_add).toEqual([
      { key: "RateLimit-Limit", value: "10" },
      { key: "RateLimit-Remaining", value: "0" },
      { key: "RateLimit-Reset", value: resetOf(res, 0) },
    ]);
    const samples = await scrape(sluice.adminPort);
    expect(sampleValue(samples, "sluice_global_shadow_mode_total", { domain: "ans" })).toBe(1);
    expect(sampleValue(samples, "sluice_decisions_total", { domain: "ans", code: "OK" })).toBe(2);
  });

  it("a request no limit applies to gets no headers", async () => {
    const res = await client.shouldRateLimit({ domain: "ans", descriptors: [descriptor({ nomatch: "z" })] });
    expect([res.overall_code, res.response_headers_to_add ?? []]).toEqual([OK, []]);
  });

  it("GET /rules shows quota_mode on the quota-mode limit only", async () => {
    const body = await (await fetch(`http://127.0.0.1:${sluice.adminPort}/rules`)).json();
    const limits = body.domains.ans.descriptors.map((d: { key: string; limits: { quota_mode?: boolean }[] }) => [d.key, d.limits[0].quota_mode]);
    expect(limits).toEqual([
      ["user", undefined],
      ["ip", undefined],
      ["q", true],
    ]);
  });
});
