// Redis on a core of its own (--redis-cpu N): this process and all it starts (sluice, the load generators,
// redis-benchmark) run on the other cores, and startRedis (lib/redis.mjs) pins each redis-server to core N.
// On a 2-core host whose cores sluice and its load share with Redis, commandstats' µs inside a script grow
// with every preemption by them (docs/benchmarks.md, "Time per call"); a deployed Redis has its cores to
// itself. The process starts itself again under `taskset` (Linux), since node cannot set its own affinity.
import { spawnSync } from "node:child_process";
import os from "node:os";

/** The env variable that tells startRedis the core, and a restarted process that it is pinned already. */
export const REDIS_CPU_ENV = "BENCH_REDIS_CPU";

/**
 * Runs the rest of this process on the cores other than `cpu` (starting it again under taskset), with
 * REDIS_CPU_ENV set; returns when this process is that one. Exits with its code otherwise.
 */
export function pinAwayFromRedis(cpu) {
  if (process.env[REDIS_CPU_ENV] === String(cpu)) return;
  const cpus = os.cpus().length;
  if (!Number.isInteger(cpu) || cpu < 0 || cpu >= cpus) throw new Error(`--redis-cpu takes a core from 0 to ${cpus - 1}, got ${cpu}`);
  if (cpus < 2) throw new Error("--redis-cpu needs at least 2 cores");
  const others = [...Array(cpus).keys()].filter((c) => c !== cpu).join(",");
  const r = spawnSync("taskset", ["-c", others, process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: "inherit",
    env: { ...process.env, [REDIS_CPU_ENV]: String(cpu) },
  });
  if (r.error) throw new Error(`--redis-cpu needs taskset (util-linux): ${r.error.message}`);
  process.exit(r.status ?? 1);
}
