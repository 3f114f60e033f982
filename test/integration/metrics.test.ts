// /metrics, GET /rules and logs of a real `sluice serve`: exact per-rule counters after a scripted
// sequence of calls, store health and failure policy on a real Redis that dies, and
// the Grafana dashboard's queries against the real output.
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient, type WireRequest } from "../helpers/grpc-client.js";
import { scrape, sampleValue, type Sample } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ROOT, ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";

// Token buckets with long units: no window boundary can fall inside the test, so counts are exact.
const RULES = `
domain: met
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 10, algorithm: token_bucket}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 2, algorithm: token_bucket}
  - key: tenant
    detailed_metric: true
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}
  - key: plan
    value: pro
    rate_limits:
      - {unit: hour, requests_per_unit: 3, algorithm: token_bucket}
      - {unit: day, requests_per_unit: 5, algorithm: token_bucket}
  - key: free
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: idle
    rate_limit: {unit: minute, requests_per_unit: 1}
`;

const RULE_METRICS = {
  sluice_rule_hits_total: "hits",
  sluice_rule_over_limit_total: "over",
  sluice_rule_near_limit_total: "near",
  sluice_rule_within_limit_total: "within",
  sluice_rule_shadow_mode_total: "shadow",
  sluice_rule_over_limit_with_local_cache_total: "local",
} as const;
type Counts = Record<(typeof RULE_METRICS)[keyof typeof RULE_METRICS], number>;

const counts = (c: Partial<Counts>): Counts => ({ hits: 0, over: 0, near: 0, within: 0, shadow: 0, local: 0, ...c });

/** Per-rule counters of one domain: "rule|limit|descriptor" -> counts. */
function ruleCounts(samples: Sample[], domain: string): Record<string, Counts> {
  const out: Record<string, Counts> = {};
  for (const s of samples) {
    const field = RULE_METRICS[s.name as keyof typeof RULE_METRICS];
    if (!field || s.labels.domain !== domain) continue;
    const id = [s.labels.rule, s.labels.limit, s.labels.descriptor].filter((x) => x !== undefined).join("|");
    (out[id] ??= counts({}))[field] = s.value;
  }
  return out;
}

describe("per-rule metrics (one Redis: the deny note only stands in front of a remote store)", () => {
  let redis: RedisProcess;
  let sluice: SluiceProcess;
  let client: RlsClient;
  const codes: number[] = [];

  const call = async (req: WireRequest) => {
    const res = await client.shouldRateLimit(req);
    codes.push(res.overall_code);
    return res.overall_code;
  };
  const one = (entries: Record<string, string>, extra: Partial<WireRequest> = {}, d: Parameters<typeof descriptor>[1] = {}) =>
    call({ domain: "met", descriptors: [descriptor(entries, d)], ...extra });

  beforeAll(async () => {
    redis = await startRedis();
    sluice = await startSluice(["--config", ruleDir({ "met.yaml": RULES }), "--redis", redis.url, "--log-level", "debug"], {
      SLUICE_DETAILED_METRIC_MAX_VALUES: "3",
      SLUICE_STORE_TIMEOUT_MS: "2000", // exact counts on a loaded box
    });
    client = rlsClient(sluice.port);

    // user=a, 10 per day: 8 single hits (up to floor(10 x 0.8), not yet near), 3 more refused, 2 more fill it (near),
    // 1 refused by the store (a deny note is taken), 1 refused by the note.
    for (let i = 0; i < 8; i++) expect(await one({ user: "a" })).toBe(OK);
    expect(await one({ user: "a" }, { hits_addend: 3 })).toBe(OVER_LIMIT);
    expect(await one({ user: "a" }, {}, { hits_addend: { value: 2 } })).toBe(OK);
    expect(await one({ user: "a" })).toBe(OVER_LIMIT);
    expect(await one({ user: "a" })).toBe(OVER_LIMIT);
    // Shadow limit of 2: the third call would be refused, and passes.
    for (let i = 0; i < 3; i++) expect(await one({ trial: "t" })).toBe(OK);
    // detailed_metric, capped at 3 distinct values: t4 and t5 fold into _other_.
    for (const t of ["t1", "t2", "t3", "t4", "t5", "t1", "t5"]) expect(await one({ tenant: t })).toBe(OK);
    // Two limits on one descriptor (3/hour, 5/day): the 4th and 5th calls are refused by the first and
    // consume nothing from the second. The 5th asks the store too: a note speaks for the first limit
    // only, and the second's figures come from the store.
    for (let i = 0; i < 3; i++) expect(await one({ plan: "pro" })).toBe(OK);
    expect(await one({ plan: "pro" })).toBe(OVER_LIMIT);
    expect(await one({ plan: "pro" })).toBe(OVER_LIMIT);
    expect(await one({ plan: "basic" })).toBe(OK); // no rule
    for (let i = 0; i < 2; i++) expect(await one({ free: "x" })).toBe(OK);
    expect(await one({ blocked: "x" })).toBe(OVER_LIMIT);
    // A per-request override is not a rule: one series per domain.
    expect(await one({ anything: "v" }, {}, { limit: { requests_per_unit: 5, unit: 4 } })).toBe(OK);
    expect(await call({ domain: "nope", descriptors: [descriptor({ user: "a" })] })).toBe(OK);
    await expect(client.shouldRateLimit({ domain: "", descriptors: [descriptor({ user: "a" })] })).rejects.toThrow(/domain/);
  });

  afterAll(async () => {
    client?.close();
    await sluice?.stop();
    await redis?.stop();
  });

  it("holds exactly the expected counters for every rule and limit, zero for rules not hit", async () => {
    const samples = await scrape(sluice.adminPort);
    expect(ruleCounts(samples, "met")).toEqual({
      "met.user|rate_limit": counts({ hits: 15, within: 10, near: 2, over: 5, local: 1 }),
      "met.trial|rate_limit": counts({ hits: 3, within: 2, near: 1, shadow: 1 }),
      "met.tenant|rate_limit|tenant=t1": counts({ hits: 2, within: 2 }),
      "met.tenant|rate_limit|tenant=t2": counts({ hits: 1, within: 1 }),
      "met.tenant|rate_limit|tenant=t3": counts({ hits: 1, within: 1 }),
      "met.tenant|rate_limit|_other_": counts({ hits: 3, within: 3 }),
      "met.plan_pro|rate_limits[0]": counts({ hits: 5, within: 3, near: 1, over: 2 }),
      // 5 a day: near past floor(5 x 0.8) = 4; the refused 4th and 5th calls would have reached 4 only.
      "met.plan_pro|rate_limits[1]": counts({ hits: 5, within: 5, near: 0 }),
      "met.free|rate_limit": counts({ hits: 2, within: 2 }),
      "met.blocked|rate_limit": counts({ hits: 1, over: 1 }),
      "met.idle|rate_limit": counts({}),
      "(override)|override": counts({ hits: 1, within: 1 }),
    });
    expect(samples.filter((s) => s.name === "sluice_rule_failure_policy_decisions_total")).toEqual([]);
  });

  it("counts answers by domain and code, errors by code, and every call in the latency histogram", async () => {
    const samples = await scrape(sluice.adminPort);
    const metCalls = codes.length - 1;
    const metOver = codes.filter((c) => c === OVER_LIMIT).length;
    expect(metOver).toBe(6);
    expect(sampleValue(samples, "sluice_decisions_total", { domain: "met", code: "OK" })).toBe(metCalls - metOver);
    expect(sampleValue(samples, "sluice_decisions_total", { domain: "met", code: "OVER_LIMIT" })).toBe(metOver);
    expect(sampleValue(samples, "sluice_decisions_total", { domain: "_unknown_", code: "OK" })).toBe(1);
    expect(sampleValue(samples, "sluice_request_errors_total", { code: "invalid_argument" })).toBe(1);
    expect(sampleValue(samples, "sluice_should_rate_limit_duration_seconds_count")).toBe(codes.length + 1);
    expect(sampleValue(samples, "sluice_should_rate_limit_duration_seconds_bucket", { le: "+Inf" })).toBe(codes.length + 1);
    expect(sampleValue(samples, "sluice_config_loads_total", { result: "success" })).toBe(1);
    expect(sampleValue(samples, "sluice_config_loads_total", { result: "error" })).toBe(0);
    expect(sampleValue(samples, "sluice_config_rules", { domain: "met" })).toBe(7);
    expect(sampleValue(samples, "sluice_store_node_up", { node: `127.0.0.1:${redis.port}` })).toBe(1);
    expect(sampleValue(samples, "sluice_deny_notes")).toBe(2); // user=a and plan=pro's hourly bucket
    expect(sampleValue(samples, "process_resident_memory_bytes")).toBeGreaterThan(0);
  });

  it("serves the Prometheus text format", async () => {
    const res = await fetch(`http://127.0.0.1:${sluice.adminPort}/metrics`);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const text = await res.text();
    expect(text).toMatch(/^# HELP sluice_rule_over_limit_total /m);
    expect(text).toMatch(/^# TYPE sluice_rule_over_limit_total counter$/m);
    expect(text).toMatch(/^# TYPE sluice_should_rate_limit_duration_seconds histogram$/m);
  });

  it("GET /rules returns the rules in force with their file and line", async () => {
    const res = await fetch(`http://127.0.0.1:${sluice.adminPort}/rules`);
    expect(res.status).toBe(200);
    const body = await res.json();
    const met = body.domains.met;
    expect(met.files).toHaveLength(1);
    const file = met.files[0];
    expect(path.basename(file)).toBe("met.yaml");
    expect(met.failure_mode).toBe("allow");
    expect(met.rule_count).toBe(7);
    expect(met.descriptors.map((d: { path: string }) => d.path)).toEqual([
      "met.user",
      "met.trial",
      "met.tenant",
      "met.plan_pro",
      "met.free",
      "met.blocked",
      "met.idle",
    ]);
    expect(met.descriptors[3]).toEqual({
      key: "plan",
      value: "pro",
      path: "met.plan_pro",
      source: { file, line: 12 },
      limits: [
        {
          label: "rate_limits[0]",
          unlimited: false,
          unit: "hour",
          requests_per_unit: 3,
          algorithm: "token_bucket",
          burst: 3,
          failure_mode: "allow",
          shadow_mode: false,
          source: { file, line: 15 },
        },
        {
          label: "rate_limits[1]",
          unlimited: false,
          unit: "day",
          requests_per_unit: 5,
          algorithm: "token_bucket",
          burst: 5,
          failure_mode: "allow",
          shadow_mode: false,
          source: { file, line: 16 },
        },
      ],
    });
    expect(met.descriptors[1]).toMatchObject({ path: "met.trial", limits: [{ shadow_mode: true }] });
    expect(met.descriptors[2]).toMatchObject({ path: "met.tenant", detailed_metric: true });
    expect(met.descriptors[4].limits).toEqual([
      { label: "rate_limit", unlimited: true, failure_mode: "allow", shadow_mode: false, source: { file, line: 17 } },
    ]);
  });

  it("logs nothing per request at info; at debug one line per refusal naming rules, never values", async () => {
    const lines = sluice.logs.flatMap((l) => {
      try {
        return [JSON.parse(l)];
      } catch {
        return [];
      }
    });
    const info = lines.filter((l) => l.level >= 30).map((l) => l.msg);
    expect(info).toEqual(["rules loaded", "rate-limit store up", "listening"]);
    expect(lines.find((l) => l.msg === "rules loaded")!.domains).toEqual({ met: 7 });
    const refusals = lines.filter((l) => l.msg === "over limit");
    expect(refusals).toHaveLength(6);
    expect(refusals[refusals.length - 1]).toMatchObject({
      domain: "met",
      refused: [{ descriptor: 0, rule: "met.blocked", limit: "rate_limit", via: "static" }],
    });
    expect(JSON.stringify(refusals)).not.toMatch(/"a"|"pro"/);
  });
});

describe("store metrics and failure policy (real Redis)", () => {
  const STORE_RULES = `
domain: st
descriptors:
  - key: k
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}
  - key: strict
    failure_mode: deny
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}
  - key: loc
    failure_mode: local
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}
`;
  let redis: RedisProcess;
  let sluice: SluiceProcess;
  let client: RlsClient;
  let node: string;

  beforeAll(async () => {
    redis = await startRedis();
    node = `127.0.0.1:${redis.port}`;
    // A generous store timeout: on a busy 2-core machine a cold call can exceed the 10 ms default.
    sluice = await startSluice(["--config", ruleDir({ "st.yaml": STORE_RULES }), "--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "2000" });
    client = rlsClient(sluice.port);
  });

  afterAll(async () => {
    client?.close();
    await sluice?.stop();
    await redis?.stop();
  });

  it("times store calls per node and shows the node up; a dead node shows down, errors and policy decisions", async () => {
    for (let i = 0; i < 2; i++) expect((await client.shouldRateLimit({ domain: "st", descriptors: [descriptor({ k: "1" })] })).overall_code).toBe(OK);
    let samples = await scrape(sluice.adminPort);
    expect(sampleValue(samples, "sluice_store_call_duration_seconds_count", { node })).toBe(2);
    expect(sampleValue(samples, "sluice_store_node_up", { node })).toBe(1);
    expect(sampleValue(samples, "sluice_store_circuit_open", { node })).toBe(0);
    expect(sampleValue(samples, "sluice_store_calls_in_flight", { node })).toBe(0);
    expect(sampleValue(samples, "sluice_store_errors_total", { node })).toBe(0);

    redis.kill();
    const deadline = Date.now() + 5000;
    while (sampleValue(samples, "sluice_store_node_up", { node }) !== 0 && Date.now() < deadline) {
      await sleep(25);
      samples = await scrape(sluice.adminPort);
    }
    expect(sampleValue(samples, "sluice_store_node_up", { node })).toBe(0);

    const code = async (key: string) => (await client.shouldRateLimit({ domain: "st", descriptors: [descriptor({ [key]: "1" })] })).overall_code;
    expect(await code("k")).toBe(OK);
    expect(await code("strict")).toBe(OVER_LIMIT);
    expect(await code("loc")).toBe(OK);
    samples = await scrape(sluice.adminPort);
    const policy = (rule: string, mode: string) =>
      sampleValue(samples, "sluice_rule_failure_policy_decisions_total", { domain: "st", rule, limit: "rate_limit", mode });
    expect([policy("st.k", "allow"), policy("st.strict", "deny"), policy("st.loc", "local")]).toEqual([1, 1, 1]);
    expect(sampleValue(samples, "sluice_rule_over_limit_total", { domain: "st", rule: "st.strict", limit: "rate_limit" })).toBe(1);
    expect(sampleValue(samples, "sluice_store_errors_total", { node })).toBe(3);

    // Every metric the Grafana dashboard queries is in this output.
    const names = new Set(samples.map((s) => s.name));
    const missing = dashboardMetricNames().filter((n) => !names.has(n));
    expect(missing).toEqual([]);
  });
});

/** Metric names in the dashboard's PromQL expressions. */
function dashboardMetricNames(): string[] {
  const dashboard = JSON.parse(fs.readFileSync(path.join(ROOT, "grafana/sluice.json"), "utf8"));
  const names = new Set<string>();
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (k === "expr" && typeof x === "string") for (const m of x.matchAll(/\b(?:sluice|process|nodejs)_[a-zA-Z0-9_]+/g)) names.add(m[0]);
        else visit(x);
      }
    }
  };
  visit(dashboard);
  expect(names.size).toBeGreaterThan(5);
  return [...names].sort();
}

describe("--log-level", () => {
  it("accepts the pino levels from the flag or SLUICE_LOG_LEVEL and refuses others", () => {
    const bad = runCli(["serve", "--log-level", "loud"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--log-level must be one of fatal, error, warn, info, debug, trace, silent, got 'loud'/);
    expect(runCli(["serve"], { SLUICE_LOG_LEVEL: "verbose" }).code).toBe(2);
  });
});
