// What sluice costs the things that grow with traffic, each on a fresh redis-server:
//  - Redis time per check: INFO commandstats (usec per script call) over an exact number of
//    one-descriptor calls through `sluice serve`, against the reference token-bucket script
//    (bench/lua/case-study-token-bucket.lua) run by redis-benchmark (EVALSHA) in the same run; also
//    requests of 2 and 5 descriptors (per check = per call / descriptors);
//  - bytes of used_memory per key and per client (one token bucket and one fixed window each), and
//    that every key has a TTL;
//  - sluice's own resident memory: idle with one rule, and the memory store holding 50,000 counters
//    under load.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { measure } from "./load.mjs";
import { idleProcess, memoryStoreUnderLoad, nodeFloor } from "./process-cost.mjs";
import { ROOT, run, shebangNodeFlags, startListening } from "./procs.mjs";
import { parseInfo, startRedis } from "./redis.mjs";
import { respLoad } from "./resp-load.mjs";
import { DESCRIPTOR_SETS } from "./scenarios.mjs";

const MAIN = path.join(ROOT, "dist/bin.js");
const RULES = path.join(ROOT, "bench/rules");
const CASE_STUDY_LUA = fs.readFileSync(path.join(ROOT, "bench/lua/case-study-token-bucket.lua"), "utf8");

/** Sets measured for Redis time: one descriptor of each algorithm, then 2 and 5. */
export const COST_SETS = ["tb1", "fw1", "sw1", "q1", "tb2", "fw2", "tb5", "fw5"];

/** The targets: per one-descriptor check against the reference script, bytes, MiB. */
export const COST_TARGETS = { tb1: 1.0, fw1: 0.7, bytesPerClient: 200, idleRssMiB: 60, memoryStoreRssMiB: 150 };

/** commandstats as { cmd: { calls, usec, failed } } (failed: rejected before running or failed while running). */
function commandstats(info) {
  const out = {};
  for (const [field, value] of Object.entries(info)) {
    if (!field.startsWith("cmdstat_")) continue;
    const m = /calls=(\d+),usec=(\d+)/.exec(value);
    const failed = Number(/rejected_calls=(\d+)/.exec(value)?.[1] ?? 0) + Number(/failed_calls=(\d+)/.exec(value)?.[1] ?? 0);
    if (m) out[field.slice(8)] = { calls: Number(m[1]), usec: Number(m[2]), failed };
  }
  return out;
}

const SCRIPT_COMMANDS = ["evalsha", "eval", "fcall"];

/** The script calls' count and time, and what ran inside them (µs per script call, by command). */
function scriptFigures(info) {
  const stats = commandstats(info);
  let calls = 0;
  let usec = 0;
  let failed = 0;
  const via = [];
  for (const c of SCRIPT_COMMANDS) {
    if (!stats[c]) continue;
    calls += stats[c].calls;
    usec += stats[c].usec;
    failed += stats[c].failed;
    via.push(c);
  }
  const inner = {};
  for (const [c, s] of Object.entries(stats)) {
    if (SCRIPT_COMMANDS.includes(c) || c === "info" || c === "config" || c === "ping" || c === "function" || c === "script" || c === "hello") continue;
    if (c === "client" || c === "command" || c === "select") continue;
    inner[c] = { perCall: calls ? s.calls / calls : 0, usPerScriptCall: calls ? s.usec / calls : 0 };
  }
  const cpuSeconds = Number(info.used_cpu_user) + Number(info.used_cpu_sys);
  return { calls, failed, usPerCall: calls ? usec / calls : 0, via: via.join("+"), inner, cpuSeconds };
}

async function resetStats(redis) {
  await redis.cli("CONFIG", "RESETSTAT");
  const cpu = parseInfo(await redis.cli("INFO", "cpu"));
  return Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys);
}

/**
 * One command sent `calls` times (16 connections, __rand_int__ over `keys`): its script figures and Redis CPU
 * per call. client "redis-benchmark", or "resp" (lib/resp-load.mjs, the same pattern): sluice's calls carry a
 * binary argument, which redis-benchmark cannot take from its command line.
 */
async function benchmarkCommand(redis, { calls, keys, connections = 16, client = "redis-benchmark" }, command) {
  const cpu0 = await resetStats(redis);
  if (client === "resp") await respLoad({ port: redis.port, calls, connections, keys }, command);
  else
    await run("redis-benchmark", [
      "-h",
      "127.0.0.1",
      "-p",
      String(redis.port),
      "-n",
      String(calls),
      "-c",
      String(connections),
      "-r",
      String(keys),
      "-q",
      ...command,
    ]);
  const f = scriptFigures(parseInfo(await redis.cli("INFO", "all")));
  // A call that errors costs little and would read as a cheap check.
  if (f.failed > 0) throw new Error(`${f.failed} of ${f.calls} script calls failed: ${command.slice(0, 4).join(" ")} ...`);
  return { ...f, cpuUsPerCall: ((f.cpuSeconds - cpu0) * 1e6) / Math.max(1, f.calls) };
}

/** The reference script through redis-benchmark (or client "resp") on a fresh Redis: EVALSHA, `calls` calls over `keys` random keys. */
export async function caseStudyCost({ calls, keys, connections, client }) {
  const redis = await startRedis();
  try {
    const sha = (await redis.cli("SCRIPT", "LOAD", CASE_STUDY_LUA)).trim();
    // Capacity 20, refill 2 per second, TTL 10 s: the reference write-up's numbers.
    const f = await benchmarkCommand(redis, { calls, keys, connections, client }, ["EVALSHA", sha, "1", "rl:__rand_int__", "20", "2", "10"]);
    return { usPerCall: f.usPerCall, calls: f.calls, via: f.via, inner: f.inner, cpuUsPerCall: f.cpuUsPerCall };
  } finally {
    await redis.stop();
  }
}

function startSluice(args, env = {}) {
  return startListening(MAIN, ["serve", "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", ...args], env, shebangNodeFlags(MAIN));
}

/**
 * sluice's script calls for one descriptor set: `calls` requests over `keys` clients, after a warm-up.
 * rps 0 = closed loop (as fast as sluice answers); a rate leaves Redis idle between calls, and each call
 * then costs more in commandstats (caches gone cold), which is why through-sluice reads dearer than the
 * replay (docs/benchmarks.md, "Time per call").
 */
export async function sluiceCost(set, { calls, keys, rps = 0 }) {
  const redis = await startRedis();
  let sluice;
  try {
    sluice = await startSluice(["--config", RULES, "--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "1000" });
    const base = { generator: "node", port: sluice.port, set, connections: 4, streams: 16, durationS: 1, warmupS: 0, rps };
    await measure({ ...base, clients: keys, count: 500 });
    const mode = await readStoreMode(sluice.adminPort);
    const cpu0 = await resetStats(redis);
    const r = await measure({ ...base, clients: keys, count: calls });
    const f = scriptFigures(parseInfo(await redis.cli("INFO", "all")));
    const checks = DESCRIPTOR_SETS[set]("0").length;
    return {
      set,
      checks,
      requests: r.done,
      errors: r.errors,
      scriptCalls: f.calls,
      via: f.via,
      mode,
      usPerCall: f.usPerCall,
      usPerCheck: f.usPerCall / checks,
      cpuUsPerCall: ((f.cpuSeconds - cpu0) * 1e6) / Math.max(1, f.calls),
      inner: f.inner,
    };
  } finally {
    await sluice?.stop();
    await redis.stop();
  }
}

/** Checks of a set as the store sends them (huge limits, as bench/rules/bench.yaml), for the replays. */
export function setChecks(set) {
  const n = DESCRIPTOR_SETS[set]("0").length;
  const base = { capacity: 1e9, hits: 1, shadow: false };
  const check = (key) => {
    if (set.startsWith("fw")) return { ...base, key, algorithm: "fixed_window", windowSeconds: 3600 };
    if (set.startsWith("sw")) return { ...base, key, algorithm: "sliding_window", windowSeconds: 3600 };
    if (set.startsWith("q")) return { ...base, key, algorithm: "quota", periods: monthPeriods(key) };
    return { ...base, key, algorithm: "token_bucket", refillPerSecond: 1e9 / 3600 };
  };
  return Array.from({ length: n }, (_, i) => check(`k${i}`));
}

/** A monthly quota's two periods around now (UTC calendar months), as the quota algorithm's check gives them. */
function monthPeriods(key) {
  const now = new Date();
  const month = (k) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + k, 1);
  return { nextKey: `${key}:next`, startMs: month(0), boundaryMs: month(1), endMs: month(2) };
}

/**
 * sluice's script call for one set replayed on a fresh Redis by lib/resp-load.mjs, exactly as the reference
 * script is replayed for comparison: the same client, calls and key spread, so no CPU taken from
 * Redis by sluice's own process on a shared machine counts against it. The call is what the store sends (lua-library.ts:
 * scriptArgs; FCALL of the function library), with a random client id in each key.
 */
export async function replayCost(set, { calls, keys, connections }) {
  const scripts = await import(path.join(ROOT, "dist/store/lua-library.js"));
  const redis = await startRedis();
  try {
    const lib = scripts.storeLibrary();
    const file = path.join(os.tmpdir(), `sluice-lib-${process.pid}.lua`);
    fs.writeFileSync(file, lib.code);
    await run("sh", ["-c", `redis-cli -h 127.0.0.1 -p ${redis.port} -x FUNCTION LOAD < ${file}`]);
    fs.rmSync(file, { force: true });
    const checks = setChecks(set);
    // Every key gets the random client id: a check may send two (a fixed window's even and odd windows' keys, a
    // quota's two periods), and one the script uses without it would be one hot key for all calls.
    const raw = scripts.scriptArgs(checks, undefined);
    const numKeys = Number(raw[0]);
    const args = raw.map((a, i) => (i >= 1 && i <= numKeys ? `${a}:__rand_int__` : a));
    const f = await benchmarkCommand(redis, { calls, keys, connections, client: "resp" }, ["FCALL", scripts.applyScript().fn, ...args]);
    return {
      set,
      checks: checks.length,
      usPerCall: f.usPerCall,
      usPerCheck: f.usPerCall / checks.length,
      calls: f.calls,
      via: f.via,
      cpuUsPerCall: f.cpuUsPerCall,
    };
  } finally {
    await redis.stop();
  }
}

/** How the store calls its scripts, as /readyz reports it (undefined from a build that does not say). */
async function readStoreMode(adminPort) {
  try {
    const res = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
    const body = await res.json();
    const node = body?.store?.nodes?.[0];
    return node?.scripts ?? undefined;
  } catch {
    return undefined;
  }
}

/** used_memory per key and per client: `clients` clients, each sent once with one token bucket and one fixed window. */
export async function keyMemory({ clients }) {
  const redis = await startRedis();
  let sluice;
  try {
    sluice = await startSluice(["--config", RULES, "--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "1000" });
    const base = { generator: "node", port: sluice.port, set: "client", connections: 4, streams: 16, durationS: 1, warmupS: 0, rps: 0 };
    await measure({ ...base, clients: 10, count: 10 });
    await redis.cli("FLUSHALL", "SYNC");
    const before = Number(parseInfo(await redis.cli("INFO", "memory")).used_memory);
    const r = await measure({ ...base, clients, count: clients, sequential: true });
    const info = parseInfo(await redis.cli("INFO", "all"));
    const after = Number(info.used_memory);
    const ks = /keys=(\d+),expires=(\d+)/.exec(info.db0 ?? "");
    const keys = ks ? Number(ks[1]) : 0;
    const expires = ks ? Number(ks[2]) : 0;
    const samples = {};
    for (const [kind, pattern] of [
      ["tokenBucket", "*api_key=key-0000001*"],
      ["fixedWindow", "*fw_api_key=key-0000001*"],
    ]) {
      const found = (await redis.cli("--scan", "--pattern", pattern)).trim().split("\n").filter(Boolean);
      const key = kind === "tokenBucket" ? found.find((k) => !k.includes("fw_")) : found[0];
      if (!key) continue;
      samples[kind] = {
        key,
        keyLength: Buffer.byteLength(key),
        memoryUsage: Number((await redis.cli("MEMORY", "USAGE", key, "SAMPLES", "0")).trim()),
        valueBytes: Number((await redis.cli("STRLEN", key)).trim()),
        encoding: (await redis.cli("OBJECT", "ENCODING", key)).trim(),
        pttlMs: Number((await redis.cli("PTTL", key)).trim()),
      };
    }
    return {
      clients,
      requests: r.done,
      errors: r.errors,
      keys,
      expires,
      everyKeyHasTtl: keys > 0 && keys === expires,
      usedMemoryDelta: after - before,
      bytesPerKey: (after - before) / Math.max(1, keys),
      bytesPerClient: (after - before) / clients,
      samples,
    };
  } finally {
    await sluice?.stop();
    await redis.stop();
  }
}

/**
 * sluice serve with one rule and the memory store, idle after a few calls: RSS and heap (process-cost.mjs), and
 * node's own floor under it: HTTP/1.1 and HTTP/2 servers alone, and with sluice's dependencies loaded.
 */
export async function idleRss() {
  const idle = await idleProcess();
  const floor = await nodeFloor();
  const withDependencies = await nodeFloor({ deps: true });
  return {
    rule: "one fixed window (api_key, 100 per minute), memory store",
    rssMiB: idle.rssMiB,
    peakRssMiB: idle.peakRssMiB,
    heapUsedMiB: idle.heapUsedMiB,
    nodeFloorMiB: floor.rssMiB,
    nodeFloorWithDependenciesMiB: withDependencies.rssMiB,
  };
}

/** The memory store holding `counters` counters (one token bucket per client) under `calls` calls: process-cost.mjs's. */
export async function memoryStoreRss({ counters, calls }) {
  const m = await memoryStoreUnderLoad({ counters, calls });
  return {
    counters,
    loadRps: m.callsPerSecond,
    idleRssMiB: m.idleRssMiB,
    peakRssMiB: m.peakRssMiB,
    rssAfterMiB: m.rssAfterMiB,
    heapUsedIdleMiB: m.heapUsedIdleMiB,
    heapUsedAfterMiB: m.heapUsedAfterMiB,
  };
}

/**
 * What one counter costs the memory store: heap used (after a full GC) by `counters` token buckets and
 * fixed windows applied through MemoryStore, in a process of its own (node --expose-gc).
 */
export async function memoryStoreBytesPerCounter({ counters }) {
  const code = `
    const { MemoryStore } = await import(${JSON.stringify(path.join(ROOT, "dist/store/memory.js"))});
    const store = new MemoryStore({ maxKeys: ${counters * 2} });
    const measure = async (algorithm) => {
      gc(); gc();
      const before = process.memoryUsage().heapUsed;
      for (let i = 0; i < ${counters}; i++) {
        const key = "sluice:{bench:api_key=key-" + String(i).padStart(7, "0") + "}:" + (algorithm === "token_bucket" ? "tb" : "fw3600");
        const check = algorithm === "token_bucket"
          ? { key, algorithm, capacity: 1e9, refillPerSecond: 1e9 / 3600, hits: 1, shadow: false }
          : { key, algorithm, capacity: 1e9, windowSeconds: 3600, hits: 1, shadow: false };
        await store.apply(0, [check]);
      }
      gc(); gc();
      return (process.memoryUsage().heapUsed - before) / ${counters};
    };
    const tokenBucket = await measure("token_bucket");
    const fixedWindow = await measure("fixed_window");
    console.log(JSON.stringify({ counters: ${counters}, tokenBucket, fixedWindow }));`;
  const out = await run(process.execPath, ["--expose-gc", "--input-type=module", "-e", code]);
  return JSON.parse(out.trim().split("\n").pop());
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/**
 * The whole measurement. Rounds alternate the reference script and every sluice set, each on a fresh
 * Redis; the median of the rounds counts. log: progress lines.
 */
export async function runRedisCost(o = {}, log = () => {}) {
  const calls = o.calls ?? 20_000;
  const keys = o.keys ?? 10_000;
  const rounds = o.rounds ?? 2;
  const sets = o.sets ?? COST_SETS;
  // caseStudyReplayed: the reference script sent by the replays' client, the measure of the replays.
  const out = { calls, keys, rounds, caseStudy: { rounds: [] }, caseStudyReplayed: { rounds: [] }, sets: {}, replay: {} };
  for (let i = 0; i < rounds; i++) {
    const cs = await caseStudyCost({ calls, keys });
    out.caseStudy.rounds.push(cs);
    log(`round ${i + 1}: reference script ${cs.usPerCall.toFixed(2)} us/call`);
    if (o.replay !== false) {
      const csr = await caseStudyCost({ calls, keys, client: "resp" });
      out.caseStudyReplayed.rounds.push(csr);
      log(`round ${i + 1}: reference script replayed by the RESP client ${csr.usPerCall.toFixed(2)} us/call`);
    }
    for (const set of sets) {
      const r = await sluiceCost(set, { calls, keys, rps: o.rps ?? 0 });
      (out.sets[set] ??= { rounds: [] }).rounds.push(r);
      log(`round ${i + 1}: ${set} ${r.usPerCall.toFixed(2)} us/call (${r.usPerCheck.toFixed(2)} per check, ${r.via}, ${r.scriptCalls} calls)`);
      if (o.replay !== false) {
        const p = await replayCost(set, { calls, keys });
        (out.replay[set] ??= { rounds: [] }).rounds.push(p);
        log(`round ${i + 1}: ${set} replayed by the RESP client ${p.usPerCall.toFixed(2)} us/call (${p.usPerCheck.toFixed(2)} per check)`);
      }
    }
  }
  out.caseStudy.usPerCall = median(out.caseStudy.rounds.map((r) => r.usPerCall));
  if (out.caseStudyReplayed.rounds.length) out.caseStudyReplayed.usPerCall = median(out.caseStudyReplayed.rounds.map((r) => r.usPerCall));
  for (const s of Object.values(out.replay)) {
    s.checks = s.rounds[0].checks;
    s.usPerCall = median(s.rounds.map((r) => r.usPerCall));
    s.usPerCheck = s.usPerCall / s.checks;
    s.vsCaseStudy = s.usPerCheck / out.caseStudyReplayed.usPerCall;
  }
  for (const s of Object.values(out.sets)) {
    s.checks = s.rounds[0].checks;
    s.via = s.rounds[0].via;
    s.mode = s.rounds[0].mode;
    s.usPerCall = median(s.rounds.map((r) => r.usPerCall));
    s.usPerCheck = s.usPerCall / s.checks;
    s.vsCaseStudy = s.usPerCheck / out.caseStudy.usPerCall;
  }
  if (o.paced) {
    // Both scripts with one call in flight (-c 1): Redis idles for each round trip, as it does behind
    // sluice on a host where sluice, not Redis, is the bottleneck. Same conditions, so the ratio holds.
    out.paced = { caseStudy: { rounds: [] }, sets: {} };
    for (let i = 0; i < rounds; i++) {
      const cs = await caseStudyCost({ calls, keys, connections: 1, client: "resp" });
      out.paced.caseStudy.rounds.push(cs.usPerCall);
      for (const set of ["tb1", "fw1"]) {
        const p = await replayCost(set, { calls, keys, connections: 1 });
        (out.paced.sets[set] ??= { rounds: [] }).rounds.push(p.usPerCheck);
        (out.paced.sets[set].ratios ??= []).push(p.usPerCheck / cs.usPerCall);
      }
      log(
        `round ${i + 1} paced (-c 1): reference script ${cs.usPerCall.toFixed(2)}, ${Object.entries(out.paced.sets)
          .map(([k, v]) => `${k} ${v.rounds[i].toFixed(2)}`)
          .join(", ")} us/call`,
      );
    }
  }
  if (o.memory !== false) {
    out.memory = await keyMemory({ clients: o.clients ?? 100_000 });
    log(
      `memory: ${out.memory.bytesPerKey.toFixed(1)} bytes/key, ${out.memory.bytesPerClient.toFixed(1)} bytes/client, ${out.memory.keys} keys, ${out.memory.expires} with TTL`,
    );
  }
  if (o.process !== false) {
    out.idle = await idleRss();
    log(`idle: ${out.idle.rssMiB.toFixed(1)} MiB RSS, heap ${out.idle.heapUsedMiB?.toFixed(1)} MiB`);
    out.memoryStore = await memoryStoreRss({ counters: o.counters ?? 50_000, calls: o.loadCalls ?? 200_000 });
    out.memoryStore.perCounter = await memoryStoreBytesPerCounter({ counters: o.counters ?? 50_000 });
    log(
      `memory store: peak ${out.memoryStore.peakRssMiB.toFixed(1)} MiB RSS, ${out.memoryStore.perCounter.tokenBucket.toFixed(0)} heap bytes per token bucket`,
    );
  }
  out.targets = judgeCost(out);
  return out;
}

/** The figures that have targets, against them. */
export function judgeCost(r) {
  const t = [];
  const cs = r.caseStudy?.usPerCall;
  for (const [set, limit] of [
    ["tb1", COST_TARGETS.tb1],
    ["fw1", COST_TARGETS.fw1],
  ]) {
    const s = r.sets?.[set];
    if (s && cs)
      t.push({ what: `${set} Redis time per check through sluice / the reference script`, value: s.usPerCheck / cs, limit, ok: s.usPerCheck / cs <= limit });
    const p = r.replay?.[set];
    const csr = r.caseStudyReplayed?.usPerCall;
    if (p && csr)
      t.push({
        what: `${set} Redis time per check, replayed / the reference script replayed by the same client`,
        value: p.usPerCheck / csr,
        limit,
        ok: p.usPerCheck / csr <= limit,
      });
  }
  if (r.memory) {
    t.push({
      what: "used_memory bytes per client (token bucket + fixed window)",
      value: r.memory.bytesPerClient,
      limit: COST_TARGETS.bytesPerClient,
      ok: r.memory.bytesPerClient <= COST_TARGETS.bytesPerClient,
    });
    t.push({ what: "every key has a TTL", value: r.memory.everyKeyHasTtl, limit: true, ok: r.memory.everyKeyHasTtl });
  }
  if (r.idle) t.push({ what: "idle RSS MiB, one rule", value: r.idle.rssMiB, limit: COST_TARGETS.idleRssMiB, ok: r.idle.rssMiB <= COST_TARGETS.idleRssMiB });
  if (r.memoryStore)
    t.push({
      what: "memory store peak RSS MiB, 50,000 counters under load",
      value: r.memoryStore.peakRssMiB,
      limit: COST_TARGETS.memoryStoreRssMiB,
      ok: r.memoryStore.peakRssMiB <= COST_TARGETS.memoryStoreRssMiB,
    });
  return t;
}

const f = (x, d = 2) => (x == null ? "-" : typeof x === "boolean" ? String(x) : x.toFixed(d));

/** Median Redis process CPU (user + sys, µs) per script call over the rounds: I/O included, preemption not. */
const cpuPerCall = (x) => median(x.rounds.map((y) => y.cpuUsPerCall));

export function formatCost(r) {
  const cs = cpuPerCall(r.caseStudy);
  const cpu = (x) => `; Redis CPU ${f(cpuPerCall(x) / x.checks)} us per check = ${f(cpuPerCall(x) / x.checks / cs)}x`;
  const lines = [
    `Redis time per check (INFO commandstats, ${r.calls.toLocaleString("en-US")} calls over ${r.keys.toLocaleString("en-US")} clients, fresh Redis each, median of ${r.rounds}):`,
  ];
  lines.push(
    `  reference token-bucket script (redis-benchmark, EVALSHA): ${f(r.caseStudy.usPerCall)} us per call (rounds ${r.caseStudy.rounds.map((x) => f(x.usPerCall)).join(", ")}); Redis CPU ${f(cs)} us per call`,
  );
  for (const [set, s] of Object.entries(r.sets)) {
    lines.push(
      `  sluice ${set.padEnd(4)} ${f(s.usPerCall)} us per call, ${f(s.usPerCheck)} per check = ${f(s.vsCaseStudy)}x the reference script's${cpu(s)} (${s.via}${s.mode ? `, ${s.mode}` : ""}; rounds ${s.rounds.map((x) => f(x.usPerCall)).join(", ")})`,
    );
  }
  if (r.caseStudyReplayed?.usPerCall) {
    const csr = cpuPerCall(r.caseStudyReplayed);
    lines.push(
      `  reference script replayed by the RESP client (bench/lib/resp-load.mjs, as redis-benchmark): ${f(r.caseStudyReplayed.usPerCall)} us per call (rounds ${r.caseStudyReplayed.rounds.map((x) => f(x.usPerCall)).join(", ")}); Redis CPU ${f(csr)} us per call`,
    );
    const rcpu = (x) => `; Redis CPU ${f(cpuPerCall(x) / x.checks)} us per check = ${f(cpuPerCall(x) / x.checks / csr)}x`;
    for (const [set, s] of Object.entries(r.replay ?? {})) {
      lines.push(
        `  replayed ${set.padEnd(4)} ${f(s.usPerCall)} us per call, ${f(s.usPerCheck)} per check = ${f(s.vsCaseStudy)}x the reference script's replayed${rcpu(s)} (the RESP client sending sluice's FCALL; rounds ${s.rounds.map((x) => f(x.usPerCall)).join(", ")})`,
      );
    }
  }
  if (r.paced) {
    const cs = r.paced.caseStudy.rounds;
    lines.push(`One call in flight (the RESP client, -c 1, Redis idle between calls): reference script ${cs.map((x) => f(x)).join(", ")} us per call`);
    for (const [set, s] of Object.entries(r.paced.sets))
      lines.push(
        `  replayed ${set.padEnd(4)} ${s.rounds.map((x) => f(x)).join(", ")} us per check = ${s.ratios.map((x) => f(x)).join(", ")}x the reference script's in the same round`,
      );
  }
  if (r.memory) {
    const m = r.memory;
    lines.push(
      `Memory: ${m.clients.toLocaleString("en-US")} clients (token bucket + fixed window): ${f(m.bytesPerClient, 1)} bytes of used_memory per client, ${f(m.bytesPerKey, 1)} per key; ${m.keys} keys, ${m.expires} with a TTL`,
    );
    for (const [kind, s] of Object.entries(m.samples))
      lines.push(`  ${kind}: ${s.key} (${s.keyLength} B name, ${s.valueBytes} B value, ${s.encoding}, MEMORY USAGE ${s.memoryUsage}, PTTL ${s.pttlMs})`);
  }
  if (r.idle)
    lines.push(
      `sluice idle, ${r.idle.rule}: ${f(r.idle.rssMiB, 1)} MiB RSS, heap used ${f(r.idle.heapUsedMiB, 1)} MiB` +
        (r.idle.nodeFloorMiB
          ? `; node's floor (HTTP/1.1 + HTTP/2 servers, same flags) ${f(r.idle.nodeFloorMiB, 1)} MiB, with sluice's dependencies ${f(r.idle.nodeFloorWithDependenciesMiB, 1)}`
          : ""),
    );
  if (r.memoryStore) {
    const m = r.memoryStore;
    lines.push(
      `memory store, ${m.counters.toLocaleString("en-US")} counters under load (${Math.round(m.loadRps)} calls/s): peak ${f(m.peakRssMiB, 1)} MiB RSS (idle ${f(m.idleRssMiB, 1)}), heap used ${f(m.heapUsedIdleMiB, 1)} -> ${f(m.heapUsedAfterMiB, 1)} MiB (garbage included)`,
      m.perCounter
        ? `  one counter, heap after a full GC: token bucket ${f(m.perCounter.tokenBucket, 0)} bytes, fixed window ${f(m.perCounter.fixedWindow, 0)} bytes (MemoryStore alone, ${m.perCounter.counters.toLocaleString("en-US")} of each)`
        : "",
    );
  }
  if (r.targets?.length) {
    lines.push("Targets:");
    for (const t of r.targets) lines.push(`  ${t.what}: ${f(t.value)} (limit ${t.limit}): ${t.ok ? "met" : "NOT met"}`);
  }
  return lines.join("\n");
}

/** Where the Redis time of one set goes: per script call, the commands run inside it. */
export function formatInner(r) {
  const lines = [];
  const row = (name, x) =>
    `  ${name}: ` +
    Object.entries(x.inner)
      .map(([c, v]) => `${c} ${f(v.perCall)}x ${f(v.usPerScriptCall)}us`)
      .join(", ");
  lines.push(row("reference script", r.caseStudy.rounds[0]));
  for (const [set, s] of Object.entries(r.sets)) lines.push(row(set, s.rounds[0]));
  return `Inside the scripts (per script call: command, times called, its us):\n${lines.join("\n")}`;
}
