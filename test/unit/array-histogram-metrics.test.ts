// The array histogram behind the per-call latency metrics: /metrics shows exactly what prom-client's own
// Histogram shows for the same observations (same lines, label order, bucket edges), and the Metrics
// hooks fill it.
import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { loadRuleFiles } from "../../src/rules/load.js";
import type { StoreStatus } from "../../src/store/store.js";
import { ArrayHistogram } from "../../src/telemetry/array-histogram.js";
import { Metrics } from "../../src/telemetry/metrics.js";
import { parseMetrics, sampleValue } from "../helpers/prom.js";

const BUCKETS = [0.001, 0.01, 0.1, 1];
/** Below, on and between bounds, above the last, and zero. */
const VALUES = [0.0005, 0.001, 0.001, 0.002, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 0];

describe("ArrayHistogram", () => {
  it("gives prom-client's text for the same observations, without a label", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const a = new ArrayHistogram({ name: "t_seconds", help: "h", buckets: BUCKETS, registers: [ours] });
    const b = new Histogram({ name: "t_seconds", help: "h", buckets: BUCKETS, registers: [theirs] });
    for (const v of VALUES) {
      a.observe(v);
      b.observe(v);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    const s = parseMetrics(await ours.metrics());
    expect(sampleValue(s, "t_seconds_bucket", { le: "0.001" })).toBe(4);
    expect(sampleValue(s, "t_seconds_bucket", { le: "0.01" })).toBe(6);
    expect(sampleValue(s, "t_seconds_bucket", { le: "1" })).toBe(10);
    expect(sampleValue(s, "t_seconds_bucket", { le: "+Inf" })).toBe(11);
    expect(sampleValue(s, "t_seconds_count")).toBe(11);
  });

  it("gives prom-client's text with one label, series in first-seen order", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const a = new ArrayHistogram({ name: "t_seconds", help: "h", buckets: BUCKETS, labelName: "node", registers: [ours] });
    const b = new Histogram({ name: "t_seconds", help: "h", buckets: BUCKETS, labelNames: ["node"], registers: [theirs] });
    VALUES.forEach((v, i) => {
      const node = i % 3 === 0 ? "127.0.0.1:7001" : "127.0.0.1:7000";
      a.observe(v, node);
      b.observe({ node }, v);
    });
    expect(await ours.metrics()).toBe(await theirs.metrics());
    const s = parseMetrics(await ours.metrics());
    expect(sampleValue(s, "t_seconds_count", { node: "127.0.0.1:7001" })).toBe(4);
    expect(sampleValue(s, "t_seconds_count", { node: "127.0.0.1:7000" })).toBe(7);
  });

  it("skips values that are not finite, and reset zeroes series a caller holds", async () => {
    const r = new Registry();
    const a = new ArrayHistogram({ name: "t_seconds", help: "h", buckets: BUCKETS, registers: [r] });
    const held = a.series();
    held.observe(Number.NaN);
    held.observe(Number.POSITIVE_INFINITY);
    held.observe(0.2);
    expect([held.count, held.sum, [...held.counts]]).toEqual([1, 0.2, [0, 0, 0, 1, 0]]);
    r.resetMetrics();
    held.observe(0.005);
    const s = parseMetrics(await r.metrics());
    expect(sampleValue(s, "t_seconds_count")).toBe(1);
    expect(sampleValue(s, "t_seconds_bucket", { le: "0.001" })).toBe(0);
    expect(sampleValue(s, "t_seconds_bucket", { le: "0.01" })).toBe(1);
    expect(sampleValue(s, "t_seconds_sum")).toBe(0.005);
  });

  it("refuses buckets that do not ascend", () => {
    expect(() => new ArrayHistogram({ name: "t_seconds", help: "h", buckets: [0.1, 0.1], registers: [] })).toThrow("t_seconds: buckets must ascend");
  });
});

describe("Metrics' call and store latency", () => {
  it("decided, failed and storeCall land in the histograms", async () => {
    const rules = loadRuleFiles([{ name: "m.yaml", text: "domain: m\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n" }], {
      mergeDomains: false,
    }).rules!;
    const store: StoreStatus = { kind: "redis", nodes: [{ id: "n1", state: "up", inFlight: 0 }] };
    const m = new Metrics({ rules: () => rules, store: () => store, denyNotes: () => 0 }, { processMetrics: false });
    m.decided({ domain: "m", descriptors: [], hitsAddend: 0 }, { code: "OK", statuses: [], outcomes: [] }, 0.0003);
    m.failed("internal", 0.02);
    m.storeCall("n1", 0.0002, true);
    m.storeCall("n2", 2, false);
    m.storeCall("n1", 0.004, true);
    const s = parseMetrics(await m.text());
    const D = "sluice_should_rate_limit_duration_seconds";
    expect(sampleValue(s, `${D}_count`)).toBe(2);
    expect(sampleValue(s, `${D}_bucket`, { le: "0.00025" })).toBe(0);
    expect(sampleValue(s, `${D}_bucket`, { le: "0.0005" })).toBe(1);
    expect(sampleValue(s, `${D}_bucket`, { le: "0.02" })).toBe(2);
    expect(sampleValue(s, `${D}_sum`)).toBe(0.0003 + 0.02);
    const S = "sluice_store_call_duration_seconds";
    expect(sampleValue(s, `${S}_count`, { node: "n1" })).toBe(2);
    expect(sampleValue(s, `${S}_bucket`, { node: "n1", le: "0.00025" })).toBe(1);
    expect(sampleValue(s, `${S}_bucket`, { node: "n1", le: "0.005" })).toBe(2);
    expect(sampleValue(s, `${S}_bucket`, { node: "n2", le: "1" })).toBe(0);
    expect(sampleValue(s, `${S}_bucket`, { node: "n2", le: "+Inf" })).toBe(1);
    expect(sampleValue(s, "sluice_store_errors_total", { node: "n2" })).toBe(1);
    expect(sampleValue(s, "sluice_store_errors_total", { node: "n1" })).toBe(0);
    m.close();
  });
});
