// RLQS with the store down, driven by a gRPC client on sluice's own port (no Envoy): each bucket's rule's
// failure_mode answers. allow: ALLOW_ALL; deny: DENY_ALL; local: leases from the in-process fallback the limiter
// counts `local` limits in, so Envoy still gets token buckets, and DENY_ALL once the fallback's count reaches the
// limit. /rules shows the buckets in use (at most 100 of them) with their assignments.
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOADER_OPTIONS } from "../helpers/grpc-client.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep, until } from "../helpers/wait.js";

const RULES = `domain: d
descriptors:
  - key: name
    value: loc
    failure_mode: local
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: name
    value: den
    failure_mode: deny
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: name
    value: alw
    failure_mode: allow
    rate_limit: {unit: hour, requests_per_unit: 10}
`;

const def = protoLoader.loadSync(["envoy/service/rate_limit_quota/v3/rlqs.proto"], LOADER_OPTIONS);
const Rlqs = (grpc.loadPackageDefinition(def) as any).envoy.service.rate_limit_quota.v3.RateLimitQuotaService;

interface Action {
  bucket_id: { bucket: Record<string, string> };
  quota_assignment_action?: { rate_limit_strategy?: { blanket_rule?: number; token_bucket?: { max_tokens: number } } };
  abandon_action?: object;
}

/** What a bucket's latest action says: "ALLOW_ALL", "DENY_ALL", "tb <max_tokens>" or "abandon". */
function said(a: Action): string {
  if (a.abandon_action) return "abandon";
  const s = a.quota_assignment_action?.rate_limit_strategy;
  if (s?.token_bucket) return `tb ${s.token_bucket.max_tokens}`;
  return s?.blanket_rule === 1 ? "DENY_ALL" : "ALLOW_ALL"; // BlanketRule: ALLOW_ALL 0, DENY_ALL 1
}

async function rlqsMetric(adminPort: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

describe("RLQS while the store is down: the rule's failure_mode", () => {
  let redis: RedisProcess;
  let sluice: SluiceProcess;
  let client: any;

  beforeAll(async () => {
    redis = await startRedis();
    sluice = await startSluice(["--config", ruleDir({ "d.yaml": RULES }), "--redis", `redis://127.0.0.1:${redis.port}`]);
    await redis.stop();
    client = new Rlqs(`127.0.0.1:${sluice.port}`, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await sluice?.stop();
  });

  it("local leases from the fallback until its count reaches the limit, deny gets DENY_ALL, allow ALLOW_ALL; /rules shows them", async () => {
    const seen: Record<string, string[]> = {};
    const call = client.StreamRateLimitQuotas();
    let ended: string | undefined;
    call.on("data", (res: { bucket_action: Action[] }) => {
      for (const a of res.bucket_action) (seen[a.bucket_id.bucket.name] ??= []).push(said(a));
    });
    call.on("error", (err: Error) => {
      ended = err.message;
    });
    const usage = (name: string, allowed: number, denied = 0) => ({
      bucket_id: { bucket: { name } },
      num_requests_allowed: allowed,
      num_requests_denied: denied,
    });
    try {
      call.write({ domain: "d", bucket_quota_usages: [usage("loc", 1), usage("den", 1), usage("alw", 1)] });
      await until(
        () => ["loc", "den", "alw"].every((n) => seen[n]?.length > 0),
        10_000,
        () => `an answer for each bucket: ${JSON.stringify(seen)} ${ended ?? ""}`,
      );
      expect(seen.den[0]).toBe("DENY_ALL");
      expect(seen.alw[0]).toBe("ALLOW_ALL");
      // A token bucket, not a blanket answer: a lease taken from the local fallback.
      expect(seen.loc[0]).toMatch(/^tb \d+$/);
      // Demand far over the limit: the fallback gives what it has left, then nothing: DENY_ALL.
      await sleep(500); // demand is measured over at least 400 ms
      call.write({ domain: "d", bucket_quota_usages: [usage("loc", 1, 500)] });
      await until(
        () => seen.loc.includes("DENY_ALL"),
        15_000,
        () => `DENY_ALL for loc once the fallback's 10 are leased: ${JSON.stringify(seen)} ${ended ?? ""}`,
      );
      const tokens = seen.loc.filter((s) => s.startsWith("tb ")).map((s) => Number(s.slice(3)));
      expect(tokens.length).toBeGreaterThanOrEqual(1);
      // Every unit leased came from the fallback's count of 10 (deny and allow lease nothing).
      const leased = await rlqsMetric(sluice.adminPort, "sluice_rlqs_units_leased_total");
      expect(leased).toBeGreaterThan(0);
      expect(leased).toBeLessThanOrEqual(10);
      expect(ended).toBeUndefined();

      // /rules: the three buckets in use and what each was told last.
      const rules = await (await fetch(`http://127.0.0.1:${sluice.adminPort}/rules`)).json();
      expect(rules.rlqs.buckets_total).toBe(3);
      const byName = Object.fromEntries(rules.rlqs.buckets.map((b: any) => [b.bucket.name, b]));
      expect(Object.keys(byName).sort()).toEqual(["alw", "den", "loc"]);
      expect(byName.den).toMatchObject({ domain: "d", assignment: "DENY_ALL" });
      expect(byName.alw).toMatchObject({ domain: "d", assignment: "ALLOW_ALL" });
      expect(byName.loc).toMatchObject({ domain: "d", assignment: "DENY_ALL" });
    } finally {
      call.end();
    }
  }, 40_000);

  it("/rules shows at most 100 RLQS buckets, with the total, and none once the stream is gone", async () => {
    const rlqsOf = async () => (await (await fetch(`http://127.0.0.1:${sluice.adminPort}/rules`)).json()).rlqs;
    await until(async () => (await rlqsOf()) === undefined, 10_000, "the first test's stream gone");
    const call = client.StreamRateLimitQuotas();
    let answers = 0;
    call.on("data", () => answers++);
    call.on("error", () => undefined);
    try {
      const usages = Array.from({ length: 150 }, (_, i) => ({ bucket_id: { bucket: { other: `b${i}` } }, num_requests_allowed: 1 }));
      call.write({ domain: "d", bucket_quota_usages: usages });
      await until(() => answers > 0, 10_000, "an answer to the 150 buckets");
      const rlqs = await rlqsOf();
      expect(rlqs.buckets_total).toBe(150);
      expect(rlqs.buckets).toHaveLength(100);
      expect(rlqs.buckets[0]).toEqual({ domain: "d", bucket: { other: "b0" }, demand: 0, assignment: "ALLOW_ALL" });
    } finally {
      call.end();
    }
    await until(async () => (await rlqsOf()) === undefined, 10_000, "no rlqs field once the stream ended");
  }, 30_000);
});
