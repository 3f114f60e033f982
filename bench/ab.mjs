// Paired comparison of sluice builds under the same conditions: each build (a checkout with dist/
// built, e.g. from `git archive REV | tar -x -C DIR` plus a node_modules link) gets its own Redis, and
// full-load windows alternate between them, so other work on a shared machine hits all of them alike.
// For a change's before/after, where two separate `npm run bench` runs differ by more than the change.
//   node bench/ab.mjs [--rounds 8] [--seconds 3] [--store redis|memory] [--store-timeout MS]
//                     [--set tb2] [--clients 10000] [--baseline] DIR...
// --store-timeout sets SLUICE_STORE_TIMEOUT_MS for every build; without it each runs its own default.
// Prints per build the medians of: calls/s, sluice CPU us/call, Redis CPU us/call, p99, and the share
// of limits answered by the failure policy (a high share makes the other figures meaningless).
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { cpuSeconds } from "./lib/cpu.mjs";
import { measure } from "./lib/load.mjs";
import { ROOT, startListening } from "./lib/procs.mjs";
import { snapshot, startRedis } from "./lib/redis.mjs";
import { DESCRIPTOR_SETS } from "./lib/scenarios.mjs";
import { scrapeCounters } from "./lib/sluice-metrics.mjs";

const { values: o, positionals: dirs } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: "string", default: "8" },
    seconds: { type: "string", default: "3" },
    store: { type: "string", default: "redis" },
    "store-timeout": { type: "string" }, // default: sluice's own
    set: { type: "string", default: "tb2" },
    clients: { type: "string", default: "10000" },
    baseline: { type: "boolean" },
  },
});
if (dirs.length === 0) {
  console.error("usage: node bench/ab.mjs [options] DIR...   (see the comment at the top of bench/ab.mjs)");
  process.exit(2);
}

const servers = [];
try {
  if (o.baseline) servers.push({ name: "baseline", proc: await startListening(path.join(ROOT, "bench/baseline.mjs"), ["--port", "0"]), runs: [] });
  for (const dir of dirs) {
    const redis = o.store === "redis" ? await startRedis() : undefined;
    // Each build serves its own checkout's bench rules when it has them: an older build may not read newer
    // rule keys (approximate), and the scenarios' descriptors are in both.
    const own = path.join(path.resolve(dir), "bench/rules");
    const rules = fs.existsSync(own) ? own : path.join(ROOT, "bench/rules");
    const args = ["serve", "--config", rules, "--host", "127.0.0.1", "--port", "0", "--admin-port", "0"];
    if (redis) args.push("--redis", redis.url);
    // Unset unless given (not inherited either): each build runs with its own default.
    const proc = await startListening(path.join(path.resolve(dir), "dist/bin.js"), args, { SLUICE_STORE_TIMEOUT_MS: o["store-timeout"] });
    servers.push({ name: dir, proc, redis, runs: [] });
  }
  const load = { set: o.set, clients: Number(o.clients), connections: 4, streams: 16, durationS: Number(o.seconds), warmupS: 1, generator: "node", rps: 0 };
  for (let round = 0; round < Number(o.rounds); round++) {
    for (const s of round % 2 ? [...servers].reverse() : servers) s.runs.push(await window(s, load));
  }
  const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  for (const s of servers) {
    const m = (k) => med(s.runs.map((r) => r[k]));
    console.log(
      `${s.name}: ${m("rps").toFixed(0)} calls/s, sluice CPU ${m("cpu").toFixed(1)} us/call, Redis CPU ${m("redis").toFixed(1)} us/call, ` +
        `p99 ${m("p99").toFixed(1)} ms, policy ${(100 * m("policy")).toFixed(2)} % of limits (CPU per window: ${s.runs.map((r) => r.cpu.toFixed(0)).join(" ")})`,
    );
  }
} finally {
  for (const s of servers) {
    await s.proc.stop();
    await s.redis?.stop();
  }
}

/** One full-load window; CPU and counters over the measured part (after the 1 s warm-up). */
async function window(s, load) {
  let first;
  const timer = setTimeout(async () => (first = await sample(s)), load.warmupS * 1000);
  const m = await measure({ ...load, port: s.proc.port });
  clearTimeout(timer);
  const last = await sample(s);
  const calls = m.rps * ((last.at - first.at) / 1000);
  return {
    rps: m.rps,
    p99: m.latencyUs.p99 / 1000,
    cpu: ((last.cpu - first.cpu) * 1e6) / calls,
    redis: ((last.redis - first.redis) * 1e6) / calls,
    policy: (last.policy - first.policy) / (calls * DESCRIPTOR_SETS[load.set]("0").length),
  };
}

async function sample(s) {
  return {
    at: performance.now(),
    cpu: cpuSeconds(s.proc.pid),
    redis: s.redis ? (await snapshot([s.redis])).cpuSeconds : 0,
    policy: s.proc.adminPort ? (await scrapeCounters(s.proc.adminPort)).policy : 0,
  };
}
