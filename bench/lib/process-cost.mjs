// sluice's own process: resident memory idle with one rule, and the memory
// store holding many counters under load (peak RSS, and sluice's CPU per call over an exact number of calls,
// so that a memory setting's cost shows on a shared host where calls/s does not). Node flags default to
// dist/bin.js's shebang (sluice's memory setting); `nodeFlags` measures another, `env` a setting of sluice's.
import fs from "node:fs";
import http2 from "node:http2";
import os from "node:os";
import path from "node:path";
import { measure } from "./load.mjs";
import { ROOT, shebangNodeFlags, startListening } from "./procs.mjs";

const MAIN = path.join(ROOT, "dist/bin.js");
/** The malloc arenas sluice's bin starts `serve` with (src/bin.ts), given to node's floor too: the same allocator. */
const SLUICE_MALLOC = { MALLOC_ARENA_MAX: "2" };
const RULES = path.join(ROOT, "bench/rules");
const ONE_RULE = "domain: bench\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: minute, requests_per_unit: 100}\n";

function startSluice(args, nodeFlags, env = {}) {
  return startListening(MAIN, ["serve", "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", ...args], env, nodeFlags ?? shebangNodeFlags(MAIN));
}

/** VmRSS and VmHWM (MiB), and user + system CPU seconds, of a process, from /proc. */
export function procStat(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? 0);
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14, 15)
  return { rssMiB: kb("VmRSS") / 1024, hwmMiB: kb("VmHWM") / 1024, fileMiB: kb("RssFile") / 1024, cpuS: ticks / 100 };
}

/** Heap used and total (MiB) from sluice's /metrics. */
async function heapMiB(adminPort) {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const metric = (name) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN) / 1048576;
  return { usedMiB: metric("nodejs_heap_size_used_bytes"), totalMiB: metric("nodejs_heap_size_total_bytes") };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One rule (a fixed window), the memory store, 10 calls, then `idleMs` idle: RSS (and the node binary's share) and heap. */
export async function idleProcess({ idleMs = 3000, nodeFlags, env } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-idle-"));
  fs.writeFileSync(path.join(dir, "one.yaml"), ONE_RULE);
  let sluice;
  try {
    sluice = await startSluice(["--config", dir], nodeFlags, env);
    await measure({ generator: "node", port: sluice.port, set: "tb1", connections: 1, streams: 1, durationS: 1, warmupS: 0, rps: 0, clients: 1, count: 10 });
    await sleep(idleMs);
    const p = procStat(sluice.pid);
    const heap = await heapMiB(sluice.adminPort);
    return { rssMiB: p.rssMiB, fileBackedMiB: p.fileMiB, peakRssMiB: p.hwmMiB, heapUsedMiB: heap.usedMiB, heapTotalMiB: heap.totalMiB };
  } finally {
    await sluice?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Node's own floor under the idle figure (bench/lib/node-floor.mjs): an HTTP/1.1 and an HTTP/2 server that
 * answered 10 HTTP/2 requests and 10 HTTP/1.1 ones, then `idleMs` idle, with the same node flags as sluice;
 * `deps` adds sluice's runtime dependencies. The difference to idleProcess is what sluice's own code holds.
 */
export async function nodeFloor({ idleMs = 3000, nodeFlags, deps = false } = {}) {
  const floor = await startListening(path.join(ROOT, "bench/lib/node-floor.mjs"), deps ? ["--deps"] : [], SLUICE_MALLOC, nodeFlags ?? shebangNodeFlags(MAIN));
  try {
    const session = http2.connect(`http://127.0.0.1:${floor.port}`);
    for (let i = 0; i < 10; i++) {
      await new Promise((resolve, reject) => {
        const req = session.request({ ":path": "/", ":method": "POST", "content-type": "application/grpc" });
        req.on("error", reject).on("end", resolve).resume();
        req.end(Buffer.alloc(16));
      });
      await (await fetch(`http://127.0.0.1:${floor.adminPort}/`)).text();
    }
    session.close();
    await sleep(idleMs);
    const p = procStat(floor.pid);
    return { rssMiB: p.rssMiB, fileBackedMiB: p.fileMiB };
  } finally {
    await floor.stop();
  }
}

/**
 * The memory store with `counters` token buckets (every client once), then `calls` calls of random clients
 * as fast as sluice answers (4 connections x 16 streams): peak RSS sampled every 100 ms, and sluice's CPU
 * per call over those calls.
 * `rulesDir` replaces bench/rules (it must hold them: the calls are the bench domain's).
 */
export async function memoryStoreUnderLoad({ counters = 50_000, calls = 300_000, nodeFlags, env, rulesDir = RULES } = {}) {
  const sluice = await startSluice(["--config", rulesDir], nodeFlags, env);
  try {
    const load = await underLoad(sluice, { counters, calls }, async () => (await heapMiB(sluice.adminPort)).usedMiB);
    const heap = await heapMiB(sluice.adminPort);
    return { ...load, heapUsedAfterMiB: heap.usedMiB, heapTotalAfterMiB: heap.totalMiB };
  } finally {
    await sluice.stop();
  }
}

/**
 * The same load against node-floor.mjs (node's http2 answering every call as an allowed one, no limiter), with
 * the same node flags, malloc arenas and the heap growth sluice would set from `env`: what node's http2 alone costs under it.
 */
export async function nodeFloorUnderLoad({ counters = 50_000, calls = 300_000, nodeFlags, env = {} } = {}) {
  const floor = await startListening(
    path.join(ROOT, "bench/lib/node-floor.mjs"),
    ["--heap-growth"],
    { ...SLUICE_MALLOC, ...env },
    nodeFlags ?? shebangNodeFlags(MAIN),
  );
  try {
    return await underLoad(floor, { counters, calls });
  } finally {
    await floor.stop();
  }
}

/**
 * 100 calls of 10 clients; every one of `counters` clients once; then `calls` random ones, measured.
 * `idleHeap` reads the heap used (MiB) at the idle point before the counters, where the server reports one.
 */
async function underLoad(server, { counters, calls }, idleHeap = async () => undefined) {
  const base = { generator: "node", port: server.port, set: "tb1", connections: 4, streams: 16, warmupS: 0, rps: 0, clients: counters, durationS: 120 };
  await measure({ ...base, clients: 10, count: 100 });
  await sleep(1000);
  const idle = procStat(server.pid);
  const heapUsedIdleMiB = await idleHeap();
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, procStat(server.pid).rssMiB);
  }, 100);
  try {
    await measure({ ...base, count: counters, sequential: true });
    const before = procStat(server.pid);
    const started = performance.now();
    const load = await measure({ ...base, count: calls });
    const seconds = (performance.now() - started) / 1000;
    const after = procStat(server.pid);
    return {
      counters,
      calls: load.done ?? calls,
      errors: load.errors ?? 0,
      callsPerSecond: calls / seconds,
      cpuUsPerCall: ((after.cpuS - before.cpuS) * 1e6) / calls,
      idleRssMiB: idle.rssMiB,
      heapUsedIdleMiB,
      peakRssMiB: Math.max(peak, after.hwmMiB),
      rssAfterMiB: after.rssMiB,
    };
  } finally {
    clearInterval(sampler);
  }
}
