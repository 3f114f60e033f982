// redis-server for the bench (a free port, never 6379; no persistence) and the INFO figures it reports.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort, ROOT, run } from "./procs.mjs";
import { REDIS_CPU_ENV } from "./pin.mjs";

/**
 * Commands sluice's scripts call inside Redis (read from lua/*.lua): Redis counts them in commandstats
 * and total_commands_processed too, so they are left out when counting what clients sent (round trips).
 */
export const SCRIPT_INNER_COMMANDS = (() => {
  const dir = path.join(ROOT, "lua");
  const names = new Set();
  for (const f of fs.readdirSync(dir).filter((n) => n.endsWith(".lua"))) {
    for (const m of fs.readFileSync(path.join(dir, f), "utf8").matchAll(/redis\.p?call\(\s*['"]([A-Za-z]+)['"]/g)) names.add(m[1].toLowerCase());
  }
  return names;
})();

export async function startRedis(extraArgs = []) {
  const port = await freePort();
  const serverArgs = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...extraArgs];
  // On a core of its own when lib/pin.mjs asked for one.
  const cpu = process.env[REDIS_CPU_ENV];
  const proc = cpu ? spawn("taskset", ["-c", cpu, "redis-server", ...serverArgs], { stdio: "ignore" }) : spawn("redis-server", serverArgs, { stdio: "ignore" });
  const cli = (...args) => run("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args]);
  const deadline = Date.now() + 10_000;
  while ((await cli("PING").catch(() => "")).trim() !== "PONG") {
    if (Date.now() > deadline || proc.exitCode !== null) {
      proc.kill("SIGKILL");
      throw new Error(`redis-server on port ${port} did not start`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const exited = new Promise((r) => proc.once("exit", r));
  return {
    port,
    pid: proc.pid,
    url: `redis://127.0.0.1:${port}`,
    cli,
    async info(section) {
      return parseInfo(await cli("INFO", section));
    },
    async stop() {
      if (proc.exitCode === null) proc.kill("SIGTERM");
      await exited;
    },
  };
}

/** Three masters, no replicas (for the Redis Cluster scenario). */
export async function startCluster(masters = 3) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-cluster-"));
  const nodes = [];
  for (let i = 0; i < masters; i++) {
    // The bus port would be port + 10000, which may not exist for a high free port.
    const node = await startRedis([
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      path.join(dir, `nodes-${i}.conf`),
      "--cluster-port",
      String(await freePort()),
      "--cluster-require-full-coverage",
      "no",
    ]);
    const stop = node.stop;
    node.stop = async () => {
      await stop();
      fs.rmSync(path.join(dir, `nodes-${i}.conf`), { force: true });
      if (fs.readdirSync(dir).length === 0) fs.rmdirSync(dir);
    };
    nodes.push(node);
  }
  await run("redis-cli", ["--cluster", "create", ...nodes.map((n) => `127.0.0.1:${n.port}`), "--cluster-replicas", "0", "--cluster-yes"]);
  const deadline = Date.now() + 20_000;
  while (!(await nodes[0].cli("CLUSTER", "INFO")).includes("cluster_state:ok")) {
    if (Date.now() > deadline) throw new Error("Redis Cluster did not reach cluster_state:ok");
    await new Promise((r) => setTimeout(r, 100));
  }
  return nodes;
}

export function parseInfo(text) {
  const out = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i <= 0 || line.startsWith("#")) continue;
    out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/**
 * The counters the bench reads, summed over nodes: commands clients sent (not the ones scripts call,
 * nor the harness's own INFO), script calls and their time, CPU, keys, memory.
 */
export async function snapshot(nodes) {
  const s = { commands: 0, scriptCalls: 0, scriptUsec: 0, cpuSeconds: 0, keys: 0, usedMemory: 0 };
  for (const n of nodes) {
    const info = parseInfo(await n.cli("INFO", "all"));
    for (const [field, value] of Object.entries(info)) {
      if (!field.startsWith("cmdstat_")) continue;
      const cmd = field.slice("cmdstat_".length);
      if (cmd === "info" || SCRIPT_INNER_COMMANDS.has(cmd)) continue;
      s.commands += Number(/calls=(\d+)/.exec(value)?.[1] ?? 0);
    }
    s.cpuSeconds += Number(info.used_cpu_user) + Number(info.used_cpu_sys);
    s.usedMemory += Number(info.used_memory);
    for (const cmd of ["cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall"]) {
      const m = /calls=(\d+),usec=(\d+)/.exec(info[cmd] ?? "");
      if (m) {
        s.scriptCalls += Number(m[1]);
        s.scriptUsec += Number(m[2]);
      }
    }
    const db = /keys=(\d+)/.exec(info.db0 ?? "");
    s.keys += db ? Number(db[1]) : 0;
  }
  return s;
}

/** MEMORY USAGE of one stored key (Redis's own estimate, key name and overhead included). */
export async function sampleKeyUsage(node) {
  const key = (await node.cli("RANDOMKEY")).trim();
  if (!key) return undefined;
  const bytes = Number((await node.cli("MEMORY", "USAGE", key, "SAMPLES", "0")).trim());
  return { key, bytes };
}
