// Where Envoy 1.40's rate_limit_quota filter differs from the RLQS API text (docs/rlqs.md, "Envoy 1.40 against
// the API text"): one case per difference, each shown from Envoy's side alone. A scripted RLQS server in the test
// (test/helpers/scripted-rlqs.ts, not sluice) sends exactly the assignments a case needs and records each usage
// report with its arrival time. One Envoy serves every case; each case has its own buckets ({name: <x-bucket>}).
// Before its first assignment a bucket denies all (no_assignment_behavior), and Envoy takes an assignment only for
// a bucket it already reported, so a case first sends one request per bucket ("touch"). An assignment is known to
// be in force in Envoy when a marker bucket, given ALLOW_ALL in the same response, admits (Envoy applies a
// response's actions together). The 5 s reports are timed across the whole file: the report bucket is made first.
// Each assertion holds Envoy 1.40's behaviour: when one fails, Envoy changed, and docs/rlqs.md's list must too.
import path from "node:path";
import protobuf from "protobufjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bucketEntries } from "../../src/core/bucket-id.js";
import { PROTO_DIR } from "../../src/core/proto-dir.js";
import type { BucketAction, TokenBucketSpec } from "../../src/rlqs/wire.js";
import { envoyAvailable, envoyLogOnFailure, httpGet, startEchoUpstream, startEnvoy, type EchoUpstream, type EnvoyProcess } from "../helpers/envoy.js";
import { rlqsEnvoyConfig } from "../helpers/rlqs-envoy.js";
import { startScriptedRlqs, type ScriptedRlqs } from "../helpers/scripted-rlqs.js";
import { sleep, until } from "../helpers/wait.js";

const CHANGED = "Envoy's rate_limit_quota filter no longer behaves as Envoy 1.40's did: docs/rlqs.md's list 'Envoy 1.40 against the API text' must change";
const ALLOW_FALLBACK = { expired_assignment_behavior: { fallback_rate_limit: { blanket_rule: "ALLOW_ALL" } } };

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => (target.startsWith("google/protobuf/") || path.isAbsolute(target) ? target : path.join(PROTO_DIR, target));
root.loadSync("envoy/service/rate_limit_quota/v3/rlqs.proto");
/** The report as Envoy 1.40 declares it (protos/: repeated BucketQuotaUsage). */
const Reports = root.lookupType("envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports");

const id = (name: string) => bucketEntries([["name", name]]);
const allow = (name: string, ttlSeconds: number): BucketAction => ({ entries: id(name), kind: "blanket", deny: false, ttlSeconds });
const deny = (name: string, ttlSeconds: number): BucketAction => ({ entries: id(name), kind: "blanket", deny: true, ttlSeconds });
const tokens = (name: string, bucket: TokenBucketSpec, ttlSeconds = 60): BucketAction => ({ entries: id(name), kind: "token_bucket", bucket, ttlSeconds });

describe.runIf(envoyAvailable(import.meta.filename))("Envoy 1.40's rate_limit_quota filter against the RLQS API text, with a scripted RLQS server", () => {
  let rlqs: ScriptedRlqs;
  let app: EchoUpstream;
  let envoy: EnvoyProcess;
  let port = 0;
  let markers = 0;

  const status = async (bucket: string) => (await httpGet(port, "/", { "x-bucket": bucket })).status;
  const reportsOf = (bucket: string) => rlqs.reports.filter((r) => r.usages.some((u) => u.entries[0]?.value === bucket));

  /** One request per bucket (denied: no assignment yet), then their first reports: Envoy now takes assignments for them. */
  async function touch(...buckets: string[]): Promise<void> {
    for (const b of buckets) expect(await status(b), `bucket ${b} before any assignment (no_assignment_behavior: DENY_ALL)`).toBe(429);
    await until(
      () => buckets.every((b) => reportsOf(b).length > 0),
      10_000,
      () => `no first report for ${buckets.join(", ")}`,
    );
  }

  /** Sends these actions with ALLOW_ALL for a fresh marker bucket; resolves when the marker admits (the actions are in force): that time. */
  async function apply(actions: BucketAction[]): Promise<number> {
    const marker = `marker-${++markers}`;
    await touch(marker);
    expect(rlqs.send([...actions, allow(marker, 60)])).toBe(1);
    await until(async () => (await status(marker)) === 200, 10_000, `marker ${marker} never admitted: Envoy did not apply the response`, 10);
    return Date.now();
  }

  beforeAll(async () => {
    rlqs = await startScriptedRlqs();
    app = await startEchoUpstream();
    const { config, listenerPort } = await rlqsEnvoyConfig({
      sluicePorts: [rlqs.port],
      appPort: app.port,
      domain: "envoy-1.40",
      reportingInterval: "1s",
      bucketSettings: {
        "fallback-no-timeout": ALLOW_FALLBACK,
        "fallback-60s": { expired_assignment_behavior: { ...ALLOW_FALLBACK.expired_assignment_behavior, expired_assignment_behavior_timeout: "60s" } },
      },
    });
    port = listenerPort;
    // The log flushed often: a case reads it.
    envoy = await startEnvoy(config, { concurrency: 1, args: ["--file-flush-interval-msec", "100"] });
    // First: opens the stream and starts Envoy's report timer, which the last case reads.
    await touch("report");
  }, 40_000);

  afterAll(async () => {
    await envoy?.stop();
    await rlqs?.close();
    await app?.close();
  });

  it("assignment_time_to_live is read in whole seconds: 1.999 s lasts 1 s, 0.9 s expires at once", async () => {
    envoyLogOnFailure(envoy);
    await touch("ttl-0.9s", "ttl-1.999s");
    const t0 = await apply([allow("ttl-0.9s", 0.9), allow("ttl-1.999s", 1.999)]);
    // The API: in force 0.9 s from t0 at least. Envoy: gone already (its timer was set to 0 s).
    await sleep(100);
    const early: number[] = [];
    for (let i = 0; i < 5; i++) {
      early.push(await status("ttl-0.9s"));
      await sleep(50);
    }
    expect(early, `ALLOW_ALL for 0.9 s, 0.1 to 0.35 s after it came into force. ${CHANGED}`).toEqual([429, 429, 429, 429, 429]);
    // The API: 1.999 s. Envoy: 1 s.
    let lastAdmitted = 0;
    let firstDenied = 0;
    await until(
      async () => {
        const s = await status("ttl-1.999s");
        if (s === 200) lastAdmitted = Date.now();
        else if (lastAdmitted) firstDenied = Date.now();
        return firstDenied > 0;
      },
      5000,
      "the 1.999 s assignment never ended",
      25,
    );
    const life = firstDenied - t0;
    console.log(`assignment_time_to_live 1.999 s: last admitted ${lastAdmitted - t0} ms, first denied ${life} ms after it came into force`);
    expect(life, `the 1.999 s assignment ended ${life} ms after it came into force (the API: 1999 ms). ${CHANGED}`).toBeGreaterThanOrEqual(700);
    expect(life, `the 1.999 s assignment ended ${life} ms after it came into force (the API: 1999 ms). ${CHANGED}`).toBeLessThan(1700);
  }, 20_000);

  it("an unset expired_assignment_behavior_timeout ends the fallback at once (the API: not limited)", async () => {
    envoyLogOnFailure(envoy);
    // Both: DENY_ALL before an assignment, ALLOW_ALL once one expired; one without a timeout for that, one with 60 s.
    await touch("fallback-no-timeout", "fallback-60s");
    const t0 = await apply([deny("fallback-no-timeout", 1), deny("fallback-60s", 1)]);
    await until(async () => (await status("fallback-60s")) === 200, 8000, "the 60 s fallback never admitted after its 1 s assignment", 25);
    const fallbackAt = Date.now() - t0;
    const after: number[] = [];
    for (let i = 0; i < 5; i++) {
      after.push(await status("fallback-no-timeout"));
      await sleep(50);
    }
    console.log(
      `expired_assignment_behavior: the 60 s fallback admitted ${fallbackAt} ms after the 1 s assignment came into force; without a timeout: ${after}`,
    );
    expect(after, `ALLOW_ALL fallback without expired_assignment_behavior_timeout, after its assignment expired. ${CHANGED}`).toEqual([
      429, 429, 429, 429, 429,
    ]);
  }, 20_000);

  it("a RequestsPerTimeUnit assignment is refused (logged, ignored)", async () => {
    envoyLogOnFailure(envoy);
    await touch("per-time-unit");
    await apply([{ entries: id("per-time-unit"), kind: "requests_per_time_unit", requests: 100, unit: "second", ttlSeconds: 60 }]);
    const got = [await status("per-time-unit"), await status("per-time-unit"), await status("per-time-unit")];
    // The API: 100 a second admits these three. Envoy: the bucket stays without an assignment (DENY_ALL).
    expect(got, `3 requests under a 100-a-second RequestsPerTimeUnit assignment. ${CHANGED}`).toEqual([429, 429, 429]);
    await until(
      () => envoy.log().includes("RequestsPerTimeUnit rate limit strategies are not yet supported"),
      5000,
      `Envoy did not log its refusal of RequestsPerTimeUnit. ${CHANGED}`,
    );
  }, 20_000);

  it("a new token bucket is compared on max_tokens, tokens_per_fill and fill_interval.nanos only: another fill_interval.seconds keeps the old one", async () => {
    envoyLogOnFailure(envoy);
    await touch("carry");
    /** Requests until one is denied (at most 3): the bucket is then empty. */
    const drain = async () => {
      const got: number[] = [];
      while (got.length < 3 && got[got.length - 1] !== 429) got.push(await status("carry"));
      return got;
    };
    // One token, refilled each second.
    await apply([tokens("carry", { maxTokens: 1, tokensPerFill: 1, fillSeconds: 1, fillNanos: 0 })]);
    expect(await drain(), "a new bucket of 1 token").toEqual([200, 429]);
    // fill_interval 1 s -> 3600 s: the API replaces the bucket (refilled once an hour). Envoy keeps the old one, refilled each second.
    await apply([tokens("carry", { maxTokens: 1, tokensPerFill: 1, fillSeconds: 3600, fillNanos: 0 })]);
    expect((await drain()).at(-1)).toBe(429);
    await sleep(1300);
    expect(await status("carry"), `1.3 s after fill_interval.seconds 1 -> 3600 (max_tokens, tokens_per_fill, nanos unchanged). ${CHANGED}`).toBe(200);
    // Only fill_interval.nanos changed: a new bucket (as the API says for any change), refilled once an hour.
    await apply([tokens("carry", { maxTokens: 1, tokensPerFill: 1, fillSeconds: 3600, fillNanos: 1 })]);
    expect((await drain()).at(-1)).toBe(429);
    await sleep(1300);
    expect(await status("carry"), `1.3 s after fill_interval.nanos 0 -> 1 (a new bucket, 1 token an hour). ${CHANGED}`).toBe(429);
  }, 20_000);

  it("a token bucket that replaces another starts with max_tokens times the share the old one had left, not full", async () => {
    envoyLogOnFailure(envoy);
    await touch("share", "share-clock");
    const spend = async (n: number) => {
      const got: number[] = [];
      for (let i = 0; i < n; i++) got.push(await status("share"));
      return got;
    };
    // 4 tokens (refilled 4 an hour: nothing in this test), 2 spent: half left.
    await apply([tokens("share", { maxTokens: 4, tokensPerFill: 4, fillSeconds: 3600, fillNanos: 0 })]);
    expect(await spend(2), "the first bucket of 4 tokens").toEqual([200, 200]);
    // A new bucket of 8 (another max_tokens): the API's TokenBucket holds max_tokens at first; Envoy gives it 8 x 2/4.
    // For 2 s, with ALLOW_ALL for 2 s on share-clock after it: when share-clock denies, both have expired.
    await apply([tokens("share", { maxTokens: 8, tokensPerFill: 8, fillSeconds: 3600, fillNanos: 0 }, 2), allow("share-clock", 2)]);
    expect(await spend(5), `a new bucket of 8 tokens replacing one of 4 with 2 left. ${CHANGED}`).toEqual([200, 200, 200, 200, 429]);
    // Once the assignment expired, the next token bucket has none before it: full.
    await until(async () => (await status("share-clock")) === 429, 8000, "the 2 s assignments never expired", 25);
    await apply([tokens("share", { maxTokens: 2, tokensPerFill: 2, fillSeconds: 3600, fillNanos: 0 })]);
    expect(await spend(3), `a bucket of 2 tokens after the previous assignment expired. ${CHANGED}`).toEqual([200, 200, 429]);
  }, 20_000);

  it("a token bucket's fill_interval is read in whole seconds: 1.999999999 s refills as 1 s does", async () => {
    envoyLogOnFailure(envoy);
    await touch("fill-1s", "fill-1.999s");
    await apply([
      tokens("fill-1s", { maxTokens: 1, tokensPerFill: 1, fillSeconds: 1, fillNanos: 0 }),
      tokens("fill-1.999s", { maxTokens: 1, tokensPerFill: 1, fillSeconds: 1, fillNanos: 999_999_999 }),
    ]);
    // One token each, refilled one per fill interval; both asked every 50 ms for 6 s.
    const admitted: Record<string, number[]> = { "fill-1s": [], "fill-1.999s": [] };
    const end = Date.now() + 6000;
    while (Date.now() < end) {
      for (const b of Object.keys(admitted)) if ((await status(b)) === 200) admitted[b].push(Date.now());
      await sleep(50);
    }
    const meanGap = (t: number[]) => (t.length > 1 ? (t[t.length - 1] - t[0]) / (t.length - 1) : Number.POSITIVE_INFINITY);
    const seen = Object.fromEntries(Object.entries(admitted).map(([b, t]) => [b, { admitted: t.length, meanGapMs: Math.round(meanGap(t)) }]));
    console.log("fill_interval read in whole seconds:", seen);
    const what = `admitted in 6 s, one token refilled per fill_interval: ${JSON.stringify(seen)} (the API: one every 2 s for fill-1.999s). ${CHANGED}`;
    expect(admitted["fill-1.999s"].length, what).toBeGreaterThanOrEqual(3);
    expect(meanGap(admitted["fill-1.999s"]), what).toBeLessThan(1600);
    expect(Math.abs(admitted["fill-1.999s"].length - admitted["fill-1s"].length), what).toBeLessThanOrEqual(1);
  }, 20_000);

  it("usage reports carry bucket_quota_usages as a repeated BucketQuotaUsage (the API text: a map<uint64, ...> on the same number)", async () => {
    envoyLogOnFailure(envoy);
    expect(rlqs.reports.length).toBeGreaterThan(0);
    for (const r of rlqs.reports) {
      // Each field-2 entry starts with a BucketQuotaUsage's bucket_id (field 1, a message: tag 0x0a); a map entry
      // would start with its uint64 key (field 1, a varint: tag 0x08).
      const reader = protobuf.Reader.create(r.raw);
      const firstTags: number[] = [];
      while (reader.pos < reader.len) {
        const tag = reader.uint32();
        if (tag >>> 3 === 2) firstTags.push(reader.bytes()[0]);
        else reader.skipType(tag & 7);
      }
      expect(firstTags, `a report's bucket_quota_usages entries (${r.raw.toString("hex")}). ${CHANGED}`).toEqual(r.usages.map(() => 0x0a));
      // Read as the repeated form, the report is whole: the same bucket ids, written back to the same bytes.
      const decoded = Reports.decode(r.raw) as any;
      expect(decoded.bucketQuotaUsages.map((u: any) => u.bucketId.bucket.name)).toEqual(r.usages.map((u) => u.entries[0].value));
      expect(Buffer.from(Reports.encode(decoded).finish()).equals(r.raw), `a report re-encoded as repeated (${r.raw.toString("hex")}). ${CHANGED}`).toBe(true);
    }
  });

  it("reporting_interval is ignored: reports come every 5 s though it says 1 s", async () => {
    envoyLogOnFailure(envoy);
    // The report bucket was the first: its report at creation, then one per timer tick (the timer starts with the stream).
    await until(
      () => reportsOf("report").length >= 3,
      15_000,
      () => `reports naming the report bucket: ${reportsOf("report").length}`,
    );
    const at = reportsOf("report").map((r) => r.atMs);
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    console.log(`reports of a bucket whose reporting_interval is 1 s, ms apart: ${gaps.join(", ")}`);
    for (const gap of gaps)
      expect(gap, `ms between two reports (reporting_interval: 1 s; all gaps ${gaps.join(", ")}). ${CHANGED}`).toBeGreaterThanOrEqual(4000);
    for (const gap of gaps) expect(gap, `ms between two reports (reporting_interval: 1 s; all gaps ${gaps.join(", ")}). ${CHANGED}`).toBeLessThanOrEqual(7000);
  }, 20_000);
});
