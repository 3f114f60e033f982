// Event-loop delay and GC pause histograms: a blocked loop and a collection show in /metrics' text,
// the bucket counts match the samples, and nothing keeps the process alive.
import { createHistogram } from "node:perf_hooks";
import v8 from "node:v8";
import vm from "node:vm";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { loadRuleFiles } from "../../src/rules/load.js";
import type { StoreStatus } from "../../src/store/store.js";
import { countAtMost, EventLoopMetrics } from "../../src/telemetry/event-loop.js";
import { Metrics } from "../../src/telemetry/metrics.js";
import { parseMetrics, sampleValue, type Sample } from "../helpers/prom.js";
import { sleep } from "../helpers/wait.js";

const DELAY = "sluice_event_loop_delay_seconds";
const GC = "sluice_gc_pause_seconds";
function busyWait(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

const value = (samples: Sample[], name: string, labels: Record<string, string> = {}) => sampleValue(samples, name, labels) ?? NaN;

/** Waits (up to 5 s) until the GC histogram of that kind counts more than `than`: observers deliver late. */
async function gcCount(registry: Registry, kind: string, than: number): Promise<number> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const n = value(parseMetrics(await registry.metrics()), `${GC}_count`, { kind });
    if (n > than || Date.now() > deadline) return n;
    await sleep(20);
  }
}

describe("event-loop delay and GC pause metrics", () => {
  let stop: (() => void) | undefined;
  afterEach(() => stop?.());

  function start() {
    const registry = new Registry();
    const m = new EventLoopMetrics(registry);
    stop = () => m.stop();
    return { registry, m, read: async () => parseMetrics(await registry.metrics()) };
  }

  it("a 60 ms busy wait moves count and sum and lands in a bucket over 50 ms", async () => {
    const { read } = start();
    await sleep(30); // the first tick only starts the clock
    const before = await read();
    busyWait(60);
    await sleep(30); // the tick after the wait records it
    const after = await read();

    expect(value(after, `${DELAY}_count`)).toBeGreaterThan(value(before, `${DELAY}_count`));
    expect(value(after, `${DELAY}_sum`) - value(before, `${DELAY}_sum`)).toBeGreaterThan(0.03);
    const over50 = (s: Sample[]) => value(s, `${DELAY}_bucket`, { le: "+Inf" }) - value(s, `${DELAY}_bucket`, { le: "0.05" });
    expect(over50(after) - over50(before)).toBeGreaterThanOrEqual(1);
    // Cumulative buckets, +Inf equal to the count.
    const buckets = after.filter((s) => s.name === `${DELAY}_bucket`).map((s) => s.value);
    expect(buckets).toEqual([...buckets].sort((a, b) => a - b));
    expect(value(after, `${DELAY}_bucket`, { le: "+Inf" })).toBe(value(after, `${DELAY}_count`));
  });

  it("counts samples at or under each bound as the samples say (to the histogram's 3 digits)", () => {
    const h = createHistogram();
    const xs = [1.2e6, 1.5e6, 2.2e6, 3e6, 9e6, 11e6, 30e6, 61e6, 61e6, 400e6];
    for (const x of xs) h.record(x);
    let lo = 0;
    for (const limit of [1e6, 2e6, 4e6, 10e6, 50e6, 100e6, 1e9]) {
      lo = countAtMost(h, h.count, limit, lo);
      expect(lo, `at ${limit}`).toBe(xs.filter((x) => x <= limit).length);
    }
    expect(countAtMost(createHistogram(), 0, 1e6)).toBe(0);
  });

  it("observes collections by kind: young-generation collections from allocation", async () => {
    const { registry } = start();
    const samples = await registry.metrics().then(parseMetrics);
    for (const kind of ["minor", "major", "incremental", "weakcb"]) expect(value(samples, `${GC}_count`, { kind })).toBeGreaterThanOrEqual(0);
    const minor = value(samples, `${GC}_count`, { kind: "minor" });
    let keep = 0;
    for (let i = 0; i < 2_000_000; i++) keep += [i, { i }].length; // short-lived garbage
    expect(keep).toBe(4_000_000);
    expect(await gcCount(registry, "minor", minor)).toBeGreaterThan(minor);
  });

  it("observes a forced mark-compact as major", async (ctx) => {
    // vitest runs without --expose-gc; the flag set at run time exposes gc() to contexts created after it.
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("typeof gc === 'function' ? gc : undefined") as (() => void) | undefined;
    if (!gc) ctx.skip("gc() cannot be exposed in this runtime");
    const { registry } = start();
    const major = value(await registry.metrics().then(parseMetrics), `${GC}_count`, { kind: "major" });
    gc!();
    expect(await gcCount(registry, "major", major)).toBeGreaterThan(major);
    expect(value(await registry.metrics().then(parseMetrics), `${GC}_sum`, { kind: "major" })).toBeGreaterThan(0);
  });

  it("holds no handle open and stops sampling on stop()", async () => {
    const resources = process.getActiveResourcesInfo().sort();
    const { m, read } = start();
    expect(process.getActiveResourcesInfo().sort()).toEqual(resources);
    await sleep(30);
    m.stop();
    m.stop(); // twice is harmless
    const count = value(await read(), `${DELAY}_count`);
    busyWait(20);
    await sleep(30);
    expect(value(await read(), `${DELAY}_count`)).toBe(count);
  });

  it("Metrics registers both with the process metrics, and close() stops them", async () => {
    const rules = loadRuleFiles([{ name: "u.yaml", text: "domain: u\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n" }], {
      mergeDomains: false,
    }).rules!;
    const store: StoreStatus = { kind: "memory", nodes: [] };
    const src = { rules: () => rules, store: () => store, denyNotes: () => 0 };
    const on = new Metrics(src);
    stop = () => on.close();
    const text = await on.text();
    expect(text).toMatch(new RegExp(`^# TYPE ${DELAY} histogram$`, "m"));
    expect(text).toMatch(new RegExp(`^# TYPE ${GC} histogram$`, "m"));
    on.close();
    const off = await new Metrics(src, { processMetrics: false }).text();
    expect(off).not.toContain(DELAY);
    expect(off).not.toContain(GC);
  });
});
