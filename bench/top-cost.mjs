// Per-refusal cost of the refusal summaries (npm run build && node bench/top-cost.mjs): observe() of a refused decision, one hot client and many.
import { RefusalSummaries } from "../dist/insight/refusal-summaries.js";
import { MemoryStore } from "../dist/store/memory.js";
const s = new RefusalSummaries({ store: new MemoryStore(), keyPrefix: "", secretKeys: ["api_key"], hashKey: "k" });
const limit = { path: "edge.remote_address", label: "rate_limit", unit: "minute", requestsPerUnit: 120 };
const reqs = Array.from({ length: 1000 }, (_, i) => ({
  domain: "edge",
  descriptors: [{ entries: [{ key: "remote_address", value: `10.0.${i >> 8}.${i & 255}` }] }],
  hitsAddend: 0,
}));
const d = { code: "OVER_LIMIT", statuses: [], outcomes: [{ index: 0, limit, hits: 1, allowed: false, remaining: 0, via: "deny_note" }] };
const ok = { code: "OK", statuses: [], outcomes: [{ index: 0, limit, hits: 1, allowed: true, remaining: 5, via: "store" }] };
for (const [name, pick, dec] of [
  ["allowed", () => reqs[0], ok],
  ["refused, one client", () => reqs[0], d],
  ["refused, 1000 clients", (i) => reqs[i % 1000], d],
]) {
  for (let round = 0; round < 3; round++) {
    const N = 1_000_000;
    const t = process.hrtime.bigint();
    for (let i = 0; i < N; i++) {
      s.observe(pick(i), dec);
      if (i % 20000 === 19999) await s.flush(); // what a second gathers, sent as the timer would (to the memory store)
    }
    const ns = Number(process.hrtime.bigint() - t) / N;
    if (round === 2) console.log(`${name}: ${ns.toFixed(0)} ns per call`);
  }
}
