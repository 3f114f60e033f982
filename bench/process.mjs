// sluice's own process: idle RSS and heap with one rule; the memory store's heap bytes per counter;
// RSS and CPU per call with 50,000 counters under load, and node's http2 alone under the same load. Rounds
// alternate the node flags given (default: the shebang's), so that a memory setting is compared in the same run;
// a variant's NAME=value words are sluice's environment (e.g. --flags="--max-semi-space-size=16 SLUICE_HEAP_GROWING_PERCENT=0").
// --descriptors N adds N per-customer descriptors (the rule-scale files) to bench/rules under load.
//   npm run build && node bench/process.mjs [--rounds N] [--counters N] [--calls N] [--descriptors N]
//        [--flags="--max-semi-space-size=16" --flags="..."] [--out FILE]
import fs from "node:fs";
import { parseArgs } from "node:util";
import { idleProcess, memoryStoreUnderLoad, nodeFloor, nodeFloorUnderLoad } from "./lib/process-cost.mjs";
import { ROOT, shebangNodeFlags } from "./lib/procs.mjs";
import { ruleDirOf } from "./lib/rule-scale.mjs";
import { memoryStoreBytesPerCounter } from "./lib/redis-cost.mjs";

const { values: o } = parseArgs({
  options: {
    rounds: { type: "string", default: "1" },
    counters: { type: "string", default: "50000" },
    calls: { type: "string", default: "300000" },
    descriptors: { type: "string", default: "0" },
    flags: { type: "string", multiple: true },
    out: { type: "string" },
  },
});
const shebang = shebangNodeFlags(`${ROOT}/dist/bin.js`);
const isEnv = (word) => /^[A-Z][A-Z0-9_]*=/.test(word);
const variants = (o.flags ?? [shebang.join(" ")]).map((f) => {
  const words = f.split(" ").filter(Boolean);
  return {
    nodeFlags: words.filter((w) => !isEnv(w)),
    env: Object.fromEntries(words.filter(isEnv).map((w) => [w.slice(0, w.indexOf("=")), w.slice(w.indexOf("=") + 1)])),
  };
});
const counters = Number(o.counters);
// bench/rules, plus the per-customer descriptors asked for (the calls are bench/rules' domain).
let rulesDir;
if (Number(o.descriptors) > 0) {
  rulesDir = ruleDirOf(Number(o.descriptors));
  for (const f of fs.readdirSync(`${ROOT}/bench/rules`)) fs.copyFileSync(`${ROOT}/bench/rules/${f}`, `${rulesDir}/${f}`);
  process.on("exit", () => fs.rmSync(rulesDir, { recursive: true, force: true }));
}
const runs = [];
for (let round = 1; round <= Number(o.rounds); round++) {
  for (const { nodeFlags, env } of variants) {
    const idle = await idleProcess({ nodeFlags, env });
    const floor = { node: await nodeFloor({ nodeFlags }), withDependencies: await nodeFloor({ nodeFlags, deps: true }) };
    const load = await memoryStoreUnderLoad({ counters, calls: Number(o.calls), nodeFlags, env, rulesDir });
    const floorUnderLoad = await nodeFloorUnderLoad({ counters, calls: Number(o.calls), nodeFlags, env });
    const run = { round, nodeFlags, env, idle, floor, memoryStore: load, nodeFloorUnderLoad: floorUnderLoad };
    runs.push(run);
    console.log(JSON.stringify(run));
  }
}
const bytesPerCounter = await memoryStoreBytesPerCounter({ counters });
console.log(JSON.stringify({ bytesPerCounter }));
const f = (v) => v.toFixed(1);
console.log(
  `\n| node flags | idle RSS MiB (node binary's pages) | node's floor, + dependencies (MiB) | idle heap used MiB | peak RSS MiB, ${counters.toLocaleString("en-US")} counters under load | node's http2 alone under the same load: peak RSS MiB | CPU µs per call (node's http2 alone) | calls/s |`,
);
console.log("|---|---|---|---|---|---|---|---|");
for (const r of runs)
  console.log(
    `| \`${[...r.nodeFlags, ...Object.entries(r.env).map(([k, v]) => `${k}=${v}`)].join(" ") || "(none)"}\` | ${f(r.idle.rssMiB)} (${f(r.idle.fileBackedMiB)}) | ${f(r.floor.node.rssMiB)}, ${f(r.floor.withDependencies.rssMiB)} | ${f(r.idle.heapUsedMiB)} | ${f(r.memoryStore.peakRssMiB)} | ${f(r.nodeFloorUnderLoad.peakRssMiB)} | ${f(r.memoryStore.cpuUsPerCall)} (${f(r.nodeFloorUnderLoad.cpuUsPerCall)}) | ${Math.round(r.memoryStore.callsPerSecond)} |`,
  );
console.log(
  `memory store heap bytes per counter (after a full GC): token bucket ${bytesPerCounter.tokenBucket.toFixed(0)}, fixed window ${bytesPerCounter.fixedWindow.toFixed(0)}`,
);
if (o.out) fs.writeFileSync(o.out, JSON.stringify({ date: new Date().toISOString(), shebang, process: { runs, bytesPerCounter } }, null, 2) + "\n");
