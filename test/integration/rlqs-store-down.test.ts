// RLQS with the store down, driven by a gRPC client on sluice's own port (no Envoy): each bucket's rule's
// failure_mode answers. allow: ALLOW_ALL; deny: DENY_ALL; local: leases from the in-process fallback the limiter
// counts `local` limits in, so Envoy still gets token buckets, and DENY_ALL once the fallback's count reaches the
// limit. /rules shows the buckets in use (at most 100 of them) with their assignments.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rlqsClient, usage, type RlqsClient } from "../helpers/rlqs-client.js";
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

async function rlqsMetric(adminPort: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

describe("RLQS while the store is down: the rule's failure_mode", () => {
  let redis: RedisProcess;
  let sluice: SluiceProcess;
  let client: RlqsClient;

  beforeAll(async () => {
    redis = await startRedis();
    sluice = await startSluice(["--config", ruleDir({ "d.yaml": RULES }), "--redis", `redis://127.0.0.1:${redis.port}`]);
    await redis.stop();
    client = rlqsClient(sluice.port);
  });
  afterAll(async () => {
    client?.close();
    await sluice?.stop();
  });

  it("local leases from the fallback until its count reaches the limit, deny gets DENY_ALL, allow ALLOW_ALL; /rules shows them", async () => {
    const call = client.open();
    // What each bucket was told, by its name.
    const seen = (name: string) => call.seen[`name=${name}`] ?? [];
    try {
      call.report("d", [usage({ name: "loc" }, 1), usage({ name: "den" }, 1), usage({ name: "alw" }, 1)]);
      await until(
        () => ["loc", "den", "alw"].every((n) => seen(n).length > 0),
        10_000,
        () => `an answer for each bucket: ${JSON.stringify(call.seen)} ${call.ended ?? ""}`,
      );
      expect(seen("den")[0]).toBe("DENY_ALL");
      expect(seen("alw")[0]).toBe("ALLOW_ALL");
      // A token bucket, not a blanket answer: a lease taken from the local fallback.
      expect(seen("loc")[0]).toMatch(/^tb \d+$/);
      // Demand far over the limit: the fallback gives what it has left, then nothing: DENY_ALL.
      await sleep(500); // demand is measured over at least 400 ms
      call.report("d", [usage({ name: "loc" }, 1, 500)]);
      await until(
        () => seen("loc").includes("DENY_ALL"),
        15_000,
        () => `DENY_ALL for loc once the fallback's 10 are leased: ${JSON.stringify(call.seen)} ${call.ended ?? ""}`,
      );
      const tokens = seen("loc")
        .filter((s) => s.startsWith("tb "))
        .map((s) => Number(s.slice(3)));
      expect(tokens.length).toBeGreaterThanOrEqual(1);
      // Every unit leased came from the fallback's count of 10 (deny and allow lease nothing).
      const leased = await rlqsMetric(sluice.adminPort, "sluice_rlqs_units_leased_total");
      expect(leased).toBeGreaterThan(0);
      expect(leased).toBeLessThanOrEqual(10);
      expect(call.ended).toBeUndefined();

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
    const call = client.open();
    try {
      call.report(
        "d",
        Array.from({ length: 150 }, (_, i) => usage({ other: `b${i}` }, 1)),
      );
      await until(() => call.answers > 0, 10_000, "an answer to the 150 buckets");
      const rlqs = await rlqsOf();
      expect(rlqs.buckets_total).toBe(150);
      expect(rlqs.buckets).toHaveLength(100);
      // ALLOW_ALL for a bucket no rule matches, sent for the default 2 s.
      const [first] = rlqs.buckets;
      expect(first).toEqual({ domain: "d", bucket: { other: "b0" }, demand: 0, assignment: "ALLOW_ALL", ttl_seconds: 2, remaining_ms: first.remaining_ms });
      expect(first.remaining_ms).toBeGreaterThan(0);
      expect(first.remaining_ms).toBeLessThanOrEqual(2000);
    } finally {
      call.end();
    }
    await until(async () => (await rlqsOf()) === undefined, 10_000, "no rlqs field once the stream ended");
  }, 30_000);
});
