// Rules at scale, standalone: for each N, a fresh Redis and sluice with N per-customer descriptors over 10
// files; start time, RSS above a one-rule start, and one file rewritten while a caller calls another
// domain every 2 ms (slowest call, RSS peak during the reload, time until the new limits serve).
// usage: node bench/rule-scale.mjs [--reloads K] [N ...]   (default 1000 10000 100000; K rewrites of the
// file in turn, 1 unless given: the slowest call of each, the first after start apart from later ones)
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { startRedis } from "./lib/redis.mjs";
import { FILES, pacedCaller, planFile, rssMiB, rssPeak, ruleDirOf, slowest, startRuleScaleSluice } from "./lib/rule-scale.mjs";

const { values: o, positionals } = parseArgs({ allowPositionals: true, options: { reloads: { type: "string", default: "1" } } });
const reloads = Number(o.reloads);
if (!(reloads >= 1)) throw new Error("--reloads takes a count of 1 or more");
const sizes = positionals.map(Number);
const settle = (ms) => new Promise((r) => setTimeout(r, ms));

async function one(n, baseRss, redis) {
  const dir = ruleDirOf(n);
  const { s, startS } = await startRuleScaleSluice(dir, redis);
  // The compile threads' memory is given back within seconds of the load: the lowest of 20 s of samples.
  let rss = rssMiB(s.pid);
  for (let i = 0; i < 20; i++) {
    await settle(1000);
    rss = Math.min(rss, rssMiB(s.pid));
  }
  const caller = await pacedCaller(s.port, `plans${FILES - 1}`, `cust-${n - 1}`);
  await settle(500);
  const peak = rssPeak(s.pid);
  const slowestEach = [];
  let reloadS = 0;
  let line = {};
  for (let k = 1; k <= reloads; k++) {
    const mark = caller.lat.length;
    const t0 = performance.now();
    fs.writeFileSync(path.join(dir, "plans0.yaml"), planFile(0, n, 7 + k));
    const before = s.logs.length;
    while (!s.logs.slice(before).some((l) => l.includes('"rules reloaded"') || l.includes("rules not reloaded"))) {
      if (performance.now() - t0 > 60_000) throw new Error("no reload within 60 s");
      await settle(5);
    }
    if (k === 1) {
      reloadS = (performance.now() - t0) / 1000;
      line = JSON.parse(s.logs.slice(before).find((l) => l.includes('"rules reloaded"')) ?? "{}");
    }
    await settle(500);
    slowestEach.push(slowest(caller.lat.slice(mark)));
  }
  const peakMiB = peak();
  const res = await caller.stop();
  await s.stop();
  fs.rmSync(dir, { recursive: true });
  return {
    n,
    cost: `load ${line.loadMs} ms, event loop ${line.mainThreadMs} ms, longest step ${line.longestStepMs} ms`,
    startS,
    rssAboveMiB: rss - baseRss,
    slowestMs: slowestEach[0],
    slowestEach,
    reloadPeakAboveMiB: peakMiB - rss,
    reloadS,
    calls: res.calls,
    errors: res.errors,
  };
}

const redis = await startRedis();
try {
  const base = await startRuleScaleSluice(ruleDirOf(1), redis);
  await settle(1500);
  const baseRss = rssMiB(base.s.pid);
  await base.s.stop();
  console.log(`one-rule start: ${base.startS.toFixed(2)} s, RSS ${baseRss.toFixed(1)} MiB`);
  console.log(
    "| descriptors | start | RSS above a one-rule start | slowest call while one file reloads | RSS peak above steady during the reload | new rules in force after |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const n of sizes.length ? sizes : [1000, 10_000, 100_000]) {
    const r = await one(n, baseRss, redis);
    console.log(
      `| ${n.toLocaleString("en")} | ${r.startS.toFixed(2)} s | +${r.rssAboveMiB.toFixed(0)} MiB | ${r.slowestEach.map((v) => v.toFixed(0)).join(" / ")} ms | +${r.reloadPeakAboveMiB.toFixed(0)} MiB | ${r.reloadS.toFixed(2)} s | (${r.calls} calls, ${r.errors} errors; ${r.cost})`,
    );
  }
} finally {
  await redis.stop();
}
