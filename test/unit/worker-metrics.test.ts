// The group view of --workers' /metrics (worker-metrics.ts) over real Metrics registries: counters and
// histograms summed, an exited worker's counts carried, gauges by meaning, per-process figures per worker.
import { AggregatorRegistry } from "prom-client";
import { describe, expect, it } from "vitest";
import { loadRuleFiles } from "../../src/rules/load.js";
import { rulesGeneration } from "../../src/server/workers/group-admin.js";
import { carriedView, carryInto, workerView, type Carried, type MetricJson } from "../../src/server/workers/worker-metrics.js";
import type { StoreStatus } from "../../src/store/store.js";
import { Metrics } from "../../src/telemetry/metrics.js";
import { parseMetrics, sampleValue, type Sample } from "../helpers/prom.js";

const rules = loadRuleFiles([{ name: "m.yaml", text: "domain: m\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n" }], {
  mergeDomains: false,
}).rules!;

/** A worker's registry with `ok` and `over` answers, its store node in `state`, `notes` deny notes. */
async function worker(ok: number, over: number, state: "up" | "down", notes: number): Promise<MetricJson[]> {
  const store: StoreStatus = { kind: "redis", nodes: [{ id: "r:1", state, inFlight: 1 }] } as StoreStatus;
  const m = new Metrics({ rules: () => rules, store: () => store, denyNotes: () => notes }, { processMetrics: false });
  const req = { domain: "m", descriptors: [], hitsAddend: 0 };
  for (let i = 0; i < ok; i++) m.decided(req, { code: "OK", statuses: [], outcomes: [] }, 0.0003);
  for (let i = 0; i < over; i++) m.decided(req, { code: "OVER_LIMIT", statuses: [], outcomes: [] }, 0.0003);
  return (await m.registry.getMetricsAsJSON()) as unknown as MetricJson[];
}

async function group(lists: MetricJson[][]): Promise<Sample[]> {
  return parseMetrics(await AggregatorRegistry.aggregate(lists).metrics());
}

const decisions = (s: Sample[]) => [
  sampleValue(s, "sluice_decisions_total", { domain: "m", code: "OK" }),
  sampleValue(s, "sluice_decisions_total", { domain: "m", code: "OVER_LIMIT" }),
  sampleValue(s, "sluice_should_rate_limit_duration_seconds_count"),
  sampleValue(s, "sluice_should_rate_limit_duration_seconds_bucket", { le: "+Inf" }),
];

describe("the group view of workers' metrics", () => {
  it("sums counters and histograms; gauges by meaning; per-process figures carry the worker's slot", async () => {
    const s = await group([workerView(await worker(3, 1, "up", 4), 0, true), workerView(await worker(2, 0, "down", 7), 1, true)]);
    expect(decisions(s)).toEqual([5, 1, 6, 6]);
    expect(sampleValue(s, "sluice_store_node_up", { node: "r:1" })).toBe(0); // up only if every worker sees it up
    expect(sampleValue(s, "sluice_store_circuit_open", { node: "r:1" })).toBe(0);
    expect(sampleValue(s, "sluice_store_calls_in_flight", { node: "r:1" })).toBe(2);
    expect(sampleValue(s, "sluice_config_rules", { domain: "m" })).toBe(1);
    expect(s.filter((x) => x.name === "sluice_deny_notes")).toEqual([
      { name: "sluice_deny_notes", labels: { worker: "0" }, value: 4 },
      { name: "sluice_deny_notes", labels: { worker: "1" }, value: 7 },
    ]);
  });

  it("an exited worker's counts stay in the sum while its replacement counts from zero", async () => {
    const carried: Carried = new Map();
    const w1 = workerView(await worker(2, 0, "up", 0), 1, true);
    const before = await group([workerView(await worker(3, 1, "up", 4), 0, true), w1]);
    expect(decisions(before)).toEqual([5, 1, 6, 6]);
    carryInto(carried, await worker(3, 1, "up", 4));
    // The replacement has not counted yet: the totals are what they were.
    const restarted = await group([workerView(await worker(0, 0, "up", 0), 0, true), w1, carriedView(carried)]);
    expect(decisions(restarted)).toEqual([5, 1, 6, 6]);
    // Its deny notes are not carried: they ended with the process.
    expect(sampleValue(restarted, "sluice_deny_notes", { worker: "0" })).toBe(0);
    const later = await group([workerView(await worker(4, 2, "up", 0), 0, true), w1, carriedView(carried)]);
    expect(decisions(later)).toEqual([9, 3, 12, 12]);
    // A second exit adds to the same carried total.
    carryInto(carried, await worker(4, 2, "up", 0));
    expect(decisions(await group([w1, carriedView(carried)]))).toEqual([9, 3, 12, 12]);
  });

  it("a stale snapshot (the worker did not answer in time) gives its counters, not its gauges", async () => {
    const s = await group([workerView(await worker(3, 1, "down", 4), 0, false), workerView(await worker(2, 0, "up", 7), 1, true)]);
    expect(decisions(s)).toEqual([5, 1, 6, 6]);
    expect(sampleValue(s, "sluice_store_node_up", { node: "r:1" })).toBe(1);
    expect(s.filter((x) => x.name === "sluice_deny_notes").map((x) => x.labels)).toEqual([{ worker: "1" }]);
  });
});

describe("the rules generation workers report", () => {
  it("is the same for the same rules, loaded twice, and differs when a limit changes", () => {
    const load = (n: number) =>
      loadRuleFiles([{ name: "m.yaml", text: `domain: m\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: ${n}}\n` }], {
        mergeDomains: false,
      }).rules!;
    expect(rulesGeneration(load(5))).toBe(rulesGeneration(load(5)));
    expect(rulesGeneration(load(5))).not.toBe(rulesGeneration(load(6)));
    expect(rulesGeneration(load(5))).toMatch(/^[0-9a-f]{16}$/);
  });
});
