// The transport bake-off (`npm run bench -- --transports a,b,...`): per scenario, one Redis (or none),
// the no-op baseline and one `sluice serve` per candidate transport (bench/transports/serve.mjs: the
// same graph, only the transport differs), all started at once and loaded one at a time:
//   full load, --rounds times, in an order that rotates every round, the best of each counts;
//   h2load with one fixed body, the same way (where h2load is installed);
//   per candidate: open loop at a quarter and at half of its own maximum, the baseline at the same
//   rate right after it (p99 against p99).
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { CANDIDATES, loadCandidate } from "../transports/candidates.mjs";
import { ensureGenerated } from "../transports/generate.mjs";
import { measure } from "./load.mjs";
import { ROOT, startListening } from "./procs.mjs";
import { snapshot, startCluster, startRedis } from "./redis.mjs";
import { DESCRIPTOR_SETS } from "./scenarios.mjs";
import { counterDelta, scrapeCounters } from "./sluice-metrics.mjs";
import { measureWithCpu } from "./window.mjs";

const SERVE = path.join(ROOT, "bench/transports/serve.mjs");
const BASELINE = path.join(ROOT, "bench/baseline.mjs");
const RULES = path.join(ROOT, "bench/rules");

/** The scenarios the targets name; the bake-off's default. */
export const BAKEOFF_SCENARIOS = ["redis-2tb", "memory-2tb"];

const LIBRARIES = {
  "grpc-js": ["@grpc/grpc-js", "@grpc/proto-loader"],
  "grpc-js-static": ["@grpc/grpc-js", "protobufjs", "protobufjs-cli"],
  connect: ["@connectrpc/connect-node", "@bufbuild/protobuf"],
  h2: [],
};

function version(pkg) {
  try {
    return createRequire(path.join(ROOT, "package.json"))(`${pkg}/package.json`).version;
  } catch {
    // Packages whose exports hide package.json.
    try {
      return JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", pkg, "package.json"), "utf8")).version;
    } catch {
      return "?";
    }
  }
}

export function parseTransports(list) {
  const names = list === "all" ? [...CANDIDATES] : list.split(",").filter(Boolean);
  const unknown = names.filter((n) => !CANDIDATES.includes(n));
  if (unknown.length) throw new Error(`unknown transport(s) ${unknown.join(", ")} (known: ${CANDIDATES.join(", ")}, or all)`);
  if (names.length === 0) throw new Error("--transports names no transport");
  return [...new Set(names)];
}

/** The candidates as the result records them: name, module, library versions, and why one cannot run. */
export async function describeCandidates(names) {
  try {
    const generated = await ensureGenerated();
    if (generated.length) console.log(`generated: ${generated.join(", ")}`);
  } catch (err) {
    // The candidates that need it then say so (unavailable); the others still run.
    console.log(`code generation failed: ${err.message}`);
  }
  const out = [];
  for (const name of names) {
    const c = await loadCandidate(name);
    const entry = { name, module: path.relative(ROOT, c.path), available: !c.unavailable };
    const libs = LIBRARIES[name].map((p) => `${p} ${version(p)}`).join(", ");
    if (libs) entry.version = libs;
    if (c.unavailable) entry.unavailable = c.unavailable;
    out.push(entry);
  }
  return out;
}

/**
 * One scenario of the bake-off. o: the run's options (durationS, warmupS, rounds, connections, streams,
 * workers, generator, storeTimeoutMs, sluiceNodeFlags: node flags for every candidate's serve.mjs, the ones
 * sluice ships with); h2load: whether h2load is installed.
 */
export async function runBakeoffScenario(sc, candidates, o, h2load) {
  const workers = o.workers ?? sc.workers ?? 1;
  const generator = o.generator === "node" || !h2load || sc.clients > 1 ? "node" : "h2load";
  const checksPerRequest = DESCRIPTOR_SETS[sc.set]("0").length;
  const redisNodes =
    sc.store === "redis"
      ? [await startRedis()]
      : sc.store === "shards"
        ? [await startRedis(), await startRedis(), await startRedis()]
        : sc.store === "cluster"
          ? await startCluster(3)
          : [];
  const urls = redisNodes.map((n) => n.url);
  const storeArgs = urls.length === 0 ? [] : sc.storeArgs ? sc.storeArgs(urls) : ["--redis", urls[0]];
  const workerArgs = workers > 1 ? ["--workers", String(workers)] : [];
  const env = { SLUICE_STORE_TIMEOUT_MS: o.storeTimeoutMs === null ? undefined : String(o.storeTimeoutMs) };
  const servers = [];
  const procs = []; // everything started, stopped at the end whatever happened
  const out = {
    id: sc.id,
    store: sc.store,
    set: sc.set,
    clients: sc.clients,
    note: sc.note,
    workers,
    generator,
    checksPerRequest,
    baseline: {},
    candidates: {},
  };
  try {
    const baselineProc = await startListening(BASELINE, ["--port", "0", "--workers", String(workers)]);
    procs.push(baselineProc);
    servers.push({ name: "baseline", baseline: true, proc: baselineProc });
    for (const c of candidates.filter((x) => x.available)) {
      try {
        const proc = await startListening(
          SERVE,
          ["--transport", c.name, "serve", "--config", RULES, "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", ...storeArgs, ...workerArgs],
          env,
          o.sluiceNodeFlags ?? [],
        );
        procs.push(proc);
        servers.push({ name: c.name, proc, counters: () => scrapeCounters(proc.adminPort, workers) });
      } catch (err) {
        out.candidates[c.name] = { failed: `did not start: ${err.message}` };
      }
    }
    const base = { set: sc.set, clients: sc.clients, connections: o.connections, streams: o.streams, durationS: o.durationS, warmupS: o.warmupS };
    const check = { ...base, generator: "node", connections: 1, streams: 4, count: 40, rps: 0, durationS: 5 };

    // Every server answers 40 calls without a gRPC error before anything is measured (h2load cannot see them).
    for (const s of [...servers]) {
      const p = await measure({ ...check, port: s.proc.port });
      if (p.errors > 0 || p.done !== 40) {
        if (s.baseline) throw new Error(`the baseline answered ${p.errors} of ${p.done} preflight calls with a gRPC error`);
        out.candidates[s.name] = { failed: `answered ${p.errors} of ${p.done} preflight calls with a gRPC error` };
        servers.splice(servers.indexOf(s), 1);
        continue;
      }
      s.answersBefore = { ok: p.ok, overLimit: p.overLimit };
      s.full = [];
      s.h2load = [];
    }

    const redisFor = (s) => (s.baseline ? [] : redisNodes);
    const oneBody = h2load && generator !== "h2load";
    for (let round = 0; round < o.rounds; round++) {
      // Rotated each round, so no server always runs right after the same other one.
      const order = servers.map((_, i) => servers[(i + round) % servers.length]);
      for (const s of order) s.full.push(await measureWithCpu({ ...base, generator, port: s.proc.port, rps: 0 }, s.proc.pid, redisFor(s), s.counters));
      if (oneBody) {
        for (const s of order) {
          s.h2load.push(await measureWithCpu({ ...base, clients: 1, generator: "h2load", port: s.proc.port, rps: 0 }, s.proc.pid, redisFor(s), s.counters));
        }
      }
    }
    const best = (runs) => (runs.length ? runs.reduce((a, b) => (b.rps > a.rps ? b : a)) : undefined);
    const rounded = (runs) => runs.map((r) => Math.round(r.rps));
    const baseline = servers[0];
    const baselineFull = best(baseline.full);
    const baselineOneBody = oneBody ? best(baseline.h2load) : generator === "h2load" ? baselineFull : undefined;
    out.baseline = { fullRoundsRps: rounded(baseline.full), full: baselineFull, h2loadRoundsRps: rounded(baseline.h2load), h2load: baselineOneBody };

    for (const s of servers.slice(1)) {
      const full = best(s.full);
      const oneBodyRun = oneBody ? best(s.h2load) : generator === "h2load" ? full : undefined;
      const c = {
        answers: { before: s.answersBefore },
        fullRoundsRps: rounded(s.full),
        full,
        h2loadRoundsRps: rounded(s.h2load),
        h2load: oneBodyRun,
        ratio: full.rps / baselineFull.rps,
        h2loadRatio: oneBodyRun && baselineOneBody ? oneBodyRun.rps / baselineOneBody.rps : undefined,
        cpuOverBaselineUs: full.cpuUsPerCall != null && baselineFull.cpuUsPerCall != null ? full.cpuUsPerCall - baselineFull.cpuUsPerCall : undefined,
      };
      // Open loop (Node generator: h2load's --rps sends in bursts) at a quarter and half of this candidate's maximum.
      for (const [label, share] of [
        ["quarter", 0.25],
        ["half", 0.5],
      ]) {
        const rate = Math.max(1, Math.floor(full.rps * share));
        const load = { ...base, generator: "node", rps: rate, count: Math.max(100, Math.round(rate * o.durationS)) };
        const before = redisNodes.length ? await snapshot(redisNodes) : undefined;
        const countersBefore = await s.counters();
        const candidate = await measure({ ...load, port: s.proc.port });
        candidate.counters = counterDelta(countersBefore, await s.counters());
        const after = redisNodes.length ? await snapshot(redisNodes) : undefined;
        const baselineRun = await measure({ ...load, port: baseline.proc.port });
        c[label] = { rate, candidate, baseline: baselineRun };
        c[label === "quarter" ? "p99RatioQuarter" : "p99RatioHalf"] = candidate.latencyUs.p99 / baselineRun.latencyUs.p99;
        if (label === "half" && before) {
          const n = candidate.done;
          c.redis = {
            commandsPerRequest: (after.commands - before.commands) / n,
            scriptCallsPerRequest: (after.scriptCalls - before.scriptCalls) / n,
            cpuUsPerRequest: ((after.cpuSeconds - before.cpuSeconds) * 1e6) / n,
            fullLoadCpuUsPerRequest: full.redisCpuUsPerRequest,
          };
        }
      }
      const post = await measure({ ...check, port: s.proc.port, count: 100 });
      c.answers.after = { ok: post.ok, overLimit: post.overLimit, errors: post.errors };
      out.candidates[s.name] = c;
    }
    // Candidates in the order they were named, failed ones included.
    out.candidates = Object.fromEntries(candidates.filter((c) => out.candidates[c.name]).map((c) => [c.name, out.candidates[c.name]]));
    return out;
  } finally {
    for (const p of procs) await p.stop();
    for (const n of redisNodes) await n.stop();
  }
}
