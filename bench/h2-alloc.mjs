// V8 heap bytes a sluice process allocates per gRPC call, end to end through its h2 server (memory store,
// so nothing but sluice runs in it): counted, not timed, so it holds on a busy machine. Each build (a
// checkout with dist/ built) serves from its own process, with its shebang's node flags and
// lib/alloc-probe.mjs loaded. After a warm-up, rounds alternate between the builds (the order reversed every
// other round): exactly --calls calls from the Node generator (--connections x --streams in flight), the
// heap's allocations over them read from the probe. Prints per build bytes per call (median of the rounds,
// and every round), scavenges per 1,000 calls, and the difference to the first build.
//   node bench/h2-alloc.mjs [--calls 50000] [--rounds 5] [--set tb2] [--clients 1000] [--connections 4]
//        [--streams 16] DIR...
// With few clients every key exists after the warm-up, so counters created in a round do not count.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { measure } from "./lib/load.mjs";
import { ROOT, shebangNodeFlags, startListening } from "./lib/procs.mjs";

const { values: o, positionals: dirs } = parseArgs({
  allowPositionals: true,
  options: {
    calls: { type: "string", default: "50000" },
    rounds: { type: "string", default: "5" },
    set: { type: "string", default: "tb2" },
    clients: { type: "string", default: "1000" },
    connections: { type: "string", default: "4" },
    streams: { type: "string", default: "16" },
  },
});
if (dirs.length === 0) {
  console.error("usage: node bench/h2-alloc.mjs [options] DIR...   (see the comment at the top of bench/h2-alloc.mjs)");
  process.exit(2);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-alloc-"));
const probe = path.join(ROOT, "bench/lib/alloc-probe.mjs");
const load = {
  generator: "node",
  set: o.set,
  clients: Number(o.clients),
  connections: Number(o.connections),
  streams: Number(o.streams),
  durationS: 0,
  warmupS: 0,
  rps: 0,
};
const servers = [];
try {
  for (const [i, dir] of dirs.entries()) {
    const bin = path.join(path.resolve(dir), "dist/bin.js");
    const own = path.join(path.resolve(dir), "bench/rules");
    const file = path.join(tmp, `${i}.jsonl`);
    const args = ["serve", "--config", fs.existsSync(own) ? own : path.join(ROOT, "bench/rules"), "--host", "127.0.0.1", "--port", "0", "--admin-port", "0"];
    // sluice's own V8 flags (its shebang's), as users run it, and the probe.
    const proc = await startListening(bin, args, { SLUICE_BENCH_ALLOC_FILE: file }, [...shebangNodeFlags(bin), "--import", probe]);
    servers.push({ name: dir, proc, file, runs: [] });
  }
  for (const s of servers) await measure({ ...load, port: s.proc.port, count: Number(o.calls) }); // warm-up: JIT, counters
  for (let round = 0; round < Number(o.rounds); round++) {
    for (const s of round % 2 ? [...servers].reverse() : servers) s.runs.push(await counted(s, Number(o.calls)));
  }
  const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const first = med(servers[0].runs.map((r) => r.perCall));
  for (const s of servers) {
    const per = med(s.runs.map((r) => r.perCall));
    console.log(
      `${s.name}: ${per.toFixed(0)} bytes/call (${s.runs.map((r) => r.perCall.toFixed(0)).join(" ")}), ` +
        `${med(s.runs.map((r) => r.scavengesPer1k)).toFixed(2)} scavenges/1k calls, ${(per - first >= 0 ? "+" : "") + (per - first).toFixed(0)} vs ${servers[0].name}`,
    );
  }
} finally {
  for (const s of servers) await s.proc.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
}

/** Exactly `calls` calls, every answer awaited, between two reads of the probe. */
async function counted(s, calls) {
  await read(s);
  const m = await measure({ ...load, port: s.proc.port, count: calls });
  if (m.errors > 0 || m.done !== calls) throw new Error(`${s.name}: ${m.done} of ${calls} calls answered, ${m.errors} errors`);
  const r = await read(s);
  return { perCall: r.allocated / calls, scavengesPer1k: (1000 * r.scavenges) / calls };
}

/** Signals the probe and waits for its line. */
async function read(s) {
  const before = fs.existsSync(s.file) ? fs.readFileSync(s.file, "utf8").split("\n").filter(Boolean).length : 0;
  process.kill(s.proc.pid, "SIGUSR2");
  for (let waited = 0; waited < 5000; waited += 10) {
    const lines = fs.existsSync(s.file) ? fs.readFileSync(s.file, "utf8").split("\n").filter(Boolean) : [];
    if (lines.length > before) return JSON.parse(lines[lines.length - 1]);
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${s.name}: the probe did not answer`);
}
