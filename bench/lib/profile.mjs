// Summaries of `node --cpu-prof` profiles: where the time of a server went, by library and by function.
import fs from "node:fs";
import path from "node:path";

const CATEGORIES = [
  [/@grpc\/grpc-js/, "grpc-js"],
  [/@grpc\/proto-loader|protobufjs|@protobufjs/, "protobufjs"],
  [/ioredis|redis-parser|denque|cluster-key-slot|standard-as-callback/, "ioredis"],
  [/pino|sonic-boom/, "pino"],
  [/\/dist\/limiter\//, "sluice limiter"],
  [/\/dist\/rules\//, "sluice rules"],
  [/\/dist\/store\//, "sluice store"],
  [/\/dist\/(approximate|counters)\//, "sluice approximate/counters"],
  [/\/dist\/server\//, "sluice server"],
  [/\/dist\//, "sluice other"],
  [/\/bench\//, "bench"],
  [/node:internal\/http2|node:http2/, "node http2"],
  [/node:internal\/(streams|stream_base_commons)|node:net/, "node net/streams"],
  [/^node:/, "node other"],
];

function category(frame) {
  if (frame.url === "") {
    if (frame.functionName === "(garbage collector)") return "GC";
    if (frame.functionName === "(idle)") return "idle";
    if (frame.functionName === "(program)") return "native (program)";
    return "native";
  }
  for (const [re, name] of CATEGORIES) if (re.test(frame.url)) return name;
  return "other js";
}

/** { totalMs, byCategory: [[name, ms, share]], topSelf: [[fn, ms, share]], inclusive: {fn: ms} } */
export function summarize(file, watch = []) {
  const p = JSON.parse(fs.readFileSync(file, "utf8"));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const selfUs = new Map();
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i];
    selfUs.set(id, (selfUs.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
  }
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let total = 0;
  let idle = 0;
  const cats = new Map();
  const fns = new Map();
  const inclusive = new Map(watch.map((w) => [w, 0]));
  for (const [id, us] of selfUs) {
    const n = byId.get(id);
    const cat = category(n.callFrame);
    if (cat === "idle") {
      idle += us;
      continue;
    }
    total += us;
    cats.set(cat, (cats.get(cat) ?? 0) + us);
    const fn = `${n.callFrame.functionName || "(anonymous)"} ${path.basename(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
    fns.set(fn, (fns.get(fn) ?? 0) + us);
    // Inclusive time of watched functions: count each sample once per distinct watched ancestor.
    const seen = new Set();
    for (let a = id; a !== undefined; a = parent.get(a)) {
      const name = byId.get(a).callFrame.functionName;
      if (inclusive.has(name) && !seen.has(name)) {
        seen.add(name);
        inclusive.set(name, inclusive.get(name) + us);
      }
    }
  }
  const share = (us) => us / total;
  return {
    file: path.basename(file),
    busyMs: total / 1000,
    idleMs: idle / 1000,
    byCategory: [...cats].sort((a, b) => b[1] - a[1]).map(([k, us]) => [k, us / 1000, share(us)]),
    topSelf: [...fns]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 25)
      .map(([k, us]) => [k, us / 1000, share(us)]),
    inclusive: [...inclusive].map(([k, us]) => [k, us / 1000, share(us)]),
  };
}

export function formatProfile(s) {
  const pct = (x) => `${(x * 100).toFixed(1)}%`.padStart(6);
  const lines = [`${s.file}: ${s.busyMs.toFixed(0)} ms busy, ${s.idleMs.toFixed(0)} ms idle`];
  lines.push("  by library (self time):");
  for (const [k, , sh] of s.byCategory) lines.push(`    ${pct(sh)}  ${k}`);
  if (s.inclusive.length) {
    lines.push("  inclusive (function and what it calls):");
    for (const [k, , sh] of s.inclusive) lines.push(`    ${pct(sh)}  ${k}`);
  }
  lines.push("  top functions (self time):");
  for (const [k, , sh] of s.topSelf) lines.push(`    ${pct(sh)}  ${k}`);
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const watch = [
    "shouldRateLimit",
    "matchLimit",
    "toCheck",
    "storeKey",
    "apply",
    "scriptArgs",
    "decodeRequest",
    "toWireResponse",
    "ShouldRateLimit",
    "sendUnaryMessage",
    "serializeMessage",
    "deserializeMessage",
  ];
  for (const f of process.argv.slice(2)) console.log(formatProfile(summarize(f, watch)) + "\n");
}
