// What sluice itself says about a run (its /metrics): answers its failure policy gave because the
// store failed or was slower than SLUICE_STORE_TIMEOUT_MS, store errors, and refusals from the deny
// note. A fail-open answer is an OK that Redis never decided, so a run with many of them is not a
// throughput figure of sluice with Redis; the tables show them next to the rates. Also its event-loop
// delay and GC pause histograms, whose deltas between two scrapes say how long the process itself
// stalled during a run (absent from builds without them: those figures stay undefined), and how much
// its V8 old space grew (prom-client's nodejs_heap_space_size_used_bytes{space="old"}).
import http from "node:http";

/** The counters summed over their labels (and over the workers of a --workers run). */
const FAMILIES = {
  policy: "sluice_rule_failure_policy_decisions_total",
  storeErrors: "sluice_store_errors_total",
  denyNote: "sluice_rule_over_limit_with_local_cache_total",
  decisions: "sluice_decisions_total",
};

function get(port) {
  return new Promise((resolve, reject) => {
    // A fresh connection per scrape: with --workers the primary hands connections to the workers in turn.
    const req = http.get({ host: "127.0.0.1", port, path: "/metrics", agent: false, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`/metrics answered ${res.statusCode}`))));
    });
    req.on("timeout", () => req.destroy(new Error("/metrics timed out")));
    req.on("error", reject);
  });
}

/** Histograms summed over their other labels (GC kinds) and workers; per kind where `byKind`. */
const HISTOGRAMS = {
  eventLoop: { name: "sluice_event_loop_delay_seconds" },
  gc: { name: "sluice_gc_pause_seconds", byKind: true },
};

/** Gauges summed over workers; a label filter picks one series. Undefined where the scrape lacks them. */
const GAUGES = {
  oldSpace: { name: "nodejs_heap_space_size_used_bytes", label: 'space="old"' },
};

const emptyHistogram = () => ({ buckets: {}, sum: 0, count: 0 });

function parse(text) {
  const out = Object.fromEntries(Object.keys(FAMILIES).map((k) => [k, 0]));
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    for (const [k, name] of Object.entries(FAMILIES)) {
      if (line.startsWith(name + "{") || line.startsWith(name + " ")) out[k] += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
    for (const [k, { name, label }] of Object.entries(GAUGES)) {
      if (line.startsWith(name + "{") && line.includes(label)) out[k] = (out[k] ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1));
    }
    for (const [k, { name, byKind }] of Object.entries(HISTOGRAMS)) {
      if (!line.startsWith(name + "_")) continue;
      const m = /^(\w+?)_(bucket|sum|count)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!m || m[1] !== name) continue;
      const labels = Object.fromEntries([...(m[3] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
      const v = Number(m[4]);
      const h = (out[k] ??= emptyHistogram());
      const targets = [h];
      if (byKind && labels.kind) targets.push(((h.byKind ??= {})[labels.kind] ??= emptyHistogram()));
      for (const t of targets) {
        if (m[2] === "bucket") t.buckets[labels.le] = (t.buckets[labels.le] ?? 0) + v;
        else t[m[2]] += v;
      }
    }
  }
  return out;
}

function histogramAdd(a, b) {
  if (!a || !b) return a ?? b;
  const out = { buckets: { ...a.buckets }, sum: a.sum + b.sum, count: a.count + b.count };
  for (const [le, n] of Object.entries(b.buckets)) out.buckets[le] = (out.buckets[le] ?? 0) + n;
  if (a.byKind || b.byKind) {
    out.byKind = { ...a.byKind };
    for (const [kind, h] of Object.entries(b.byKind ?? {})) out.byKind[kind] = histogramAdd(out.byKind[kind], h);
  }
  return out;
}

function histogramDelta(before, after) {
  if (!before || !after) return undefined;
  const out = { buckets: {}, sum: after.sum - before.sum, count: after.count - before.count };
  for (const [le, n] of Object.entries(after.buckets)) out.buckets[le] = n - (before.buckets[le] ?? 0);
  if (after.byKind)
    out.byKind = Object.fromEntries(Object.entries(after.byKind).map(([kind, h]) => [kind, histogramDelta(before.byKind?.[kind] ?? emptyHistogram(), h)]));
  return out;
}

/** Finite bounds ascending, with their cumulative counts, and the total (+Inf). */
function cumulative(h) {
  const finite = Object.entries(h.buckets)
    .filter(([le]) => le !== "+Inf")
    .map(([le, n]) => [Number(le), n])
    .sort((a, b) => a[0] - b[0]);
  return { finite, total: h.buckets["+Inf"] ?? h.count };
}

/**
 * Quantile q the way Prometheus' histogram_quantile estimates it: linear within the bucket it falls
 * in; in the +Inf bucket, the highest finite bound. Seconds; undefined without samples.
 */
export function histogramQuantile(h, q) {
  const { finite, total } = cumulative(h);
  if (!(total > 0)) return undefined;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, n] of finite) {
    if (n >= rank) return lower + ((le - lower) * (rank - below)) / Math.max(1, n - below);
    lower = le;
    below = n;
  }
  return lower;
}

/** Upper bound (seconds) of the highest bucket that got a sample: "+Inf" above the last bound, undefined without samples. */
export function highestBucket(h) {
  const { finite, total } = cumulative(h);
  if (!(total > 0)) return undefined;
  for (const [le, n] of finite) if (n >= total) return le;
  return "+Inf";
}

const ms = (s) => (typeof s === "number" ? Number((s * 1000).toPrecision(4)) : s);
/** [le, cumulative count] pairs in bound order (an object would list "1" first). */
const pairs = (h) => {
  const { finite, total } = cumulative(h);
  return [...finite, ["+Inf", total]];
};

/** A delta's figures for the tables and the JSON: ms, with the bucket counts they come from. */
function summarize(k, h) {
  if (!h) return undefined;
  if (k === "eventLoop")
    return { samples: h.count, p99Ms: ms(histogramQuantile(h, 0.99)), maxBoundMs: ms(highestBucket(h)), sumMs: ms(Math.max(0, h.sum)), buckets: pairs(h) };
  const out = { count: h.count, ms: ms(h.sum), p99Ms: ms(histogramQuantile(h, 0.99)), maxBoundMs: ms(highestBucket(h)), buckets: pairs(h) };
  if (h.byKind) out.byKind = Object.fromEntries(Object.entries(h.byKind).map(([kind, x]) => [kind, { count: x.count, ms: ms(x.sum) }]));
  return out;
}

/**
 * One reading of the counters. Each worker has its own registry; `workers` sequential connections
 * reach each worker once (node:cluster's round robin), so their sum is the service's.
 */
export async function scrapeCounters(adminPort, workers = 1) {
  const total = Object.fromEntries(Object.keys(FAMILIES).map((k) => [k, 0]));
  for (let i = 0; i < workers; i++) {
    const one = parse(await get(adminPort));
    for (const k of Object.keys(FAMILIES)) total[k] += one[k];
    for (const k of Object.keys(GAUGES)) total[k] = i === 0 ? one[k] : total[k] !== undefined && one[k] !== undefined ? total[k] + one[k] : undefined;
    for (const k of Object.keys(HISTOGRAMS)) total[k] = i === 0 ? one[k] : one[k] && total[k] ? histogramAdd(total[k], one[k]) : undefined;
  }
  return total;
}

/**
 * Counters' differences; for the histograms, figures of the samples in between: eventLoop {samples,
 * p99Ms, maxBoundMs, sumMs, buckets}, gc {count, ms, p99Ms, maxBoundMs, byKind, buckets}; maxBoundMs:
 * the bound of the highest bucket that got a sample, "+Inf" above the last; buckets: [le seconds,
 * cumulative count] pairs. oldSpaceGrowthBytes: old-space bytes used at the second scrape minus the
 * first, summed over workers (negative when a mark-compact freed more than the window added).
 */
export function counterDelta(before, after) {
  const out = Object.fromEntries(Object.keys(FAMILIES).map((k) => [k, after[k] - before[k]]));
  for (const k of Object.keys(HISTOGRAMS)) {
    const d = summarize(k, histogramDelta(before[k], after[k]));
    if (d) out[k] = d;
  }
  if (before.oldSpace !== undefined && after.oldSpace !== undefined) out.oldSpaceGrowthBytes = after.oldSpace - before.oldSpace;
  return out;
}
