// Cost of the per-request metrics hook: Metrics.decided() on real limiter decisions, against the
// same counts done with prom-client's labels().inc(). Run: npm run build && node bench/metrics-observer.mjs
import { Counter, Registry } from "prom-client";
import { Limiter } from "../dist/limiter/limiter.js";
import { loadRuleDir } from "../dist/rules/load.js";
import { MemoryStore } from "../dist/store/memory.js";
import { Metrics } from "../dist/telemetry/metrics.js";

const N = 200_000;
const rules = loadRuleDir("config", { mergeDomains: false }).rules;
const limiter = new Limiter(rules, new MemoryStore({ maxKeys: 1_000_000 }));
const requests = [];
for (let i = 0; i < 1000; i++) {
  requests.push({
    domain: "edge",
    hitsAddend: 0,
    descriptors: [
      { entries: [{ key: "remote_address", value: `10.0.${i >> 8}.${i & 255}` }] },
      { entries: [{ key: "account", value: `user${i}` }] },
      { entries: [{ key: "api_key", value: `key${i % 50}` }] },
      { entries: [{ key: "generic_key", value: "search" }] },
    ],
  });
}
const decisions = [];
for (const r of requests) decisions.push(await limiter.shouldRateLimit(r));

function time(label, fn) {
  for (let i = 0; i < 20_000; i++) fn(i); // warm up
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) fn(i);
  const ns = Number(process.hrtime.bigint() - t0) / N;
  console.log(`${label.padEnd(58)} ${ns.toFixed(0).padStart(6)} ns/request`);
  return ns;
}

const metrics = new Metrics({ rules: () => rules, store: () => ({ kind: "memory", nodes: [] }), denyNotes: () => 0 }, { processMetrics: false });
metrics.configLoaded(rules);
time("Metrics.decided (4 limits; plain numbers, series at scrape)", (i) => metrics.decided(requests[i % 1000], decisions[i % 1000], 0.0001));

const reg = new Registry();
const hits = new Counter({ name: "h_total", help: "h", labelNames: ["domain", "rule", "limit"], registers: [reg] });
const within = new Counter({ name: "w_total", help: "w", labelNames: ["domain", "rule", "limit"], registers: [reg] });
const children = new WeakMap();
time("prom-client labels() children cached per limit, 2 inc each", (i) => {
  for (const o of decisions[i % 1000].outcomes) {
    let c = children.get(o.limit);
    if (!c) children.set(o.limit, (c = [hits.labels("edge", o.limit.path, o.limit.label), within.labels("edge", o.limit.path, o.limit.label)]));
    c[0].inc(o.hits);
    c[1].inc(o.hits);
  }
});

let k = 0;
const t0 = process.hrtime.bigint();
for (let i = 0; i < 20_000; i++) await limiter.shouldRateLimit(requests[k++ % 1000]);
const decideNs = Number(process.hrtime.bigint() - t0) / 20_000;
console.log(`${"for scale: Limiter.shouldRateLimit on the memory store".padEnd(58)} ${decideNs.toFixed(0).padStart(6)} ns/request`);
const t1 = process.hrtime.bigint();
await metrics.text();
console.log(`scrape of ${[...metrics.rules.all()].length} rule series: ${(Number(process.hrtime.bigint() - t1) / 1e6).toFixed(2)} ms`);
