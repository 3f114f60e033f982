// Redis's instructions per script call, counted by valgrind's callgrind: sluice's call for each set against
// the reference token-bucket script, sent the same way (lib/resp-load.mjs: 16 connections, one call in
// flight each, random clients). Unlike commandstats' µs, a count does not move with the host's load, so two
// versions of the Lua can be compared in one line each (docs/benchmarks.md, "Instructions per call"). The count
// is the whole server's: reading and parsing the call and writing the reply included.
//   npm run build && node bench/redis-instructions.mjs [--calls N] [--keys N] [--sets tb1,fw1,...] [--lib DIST_DIR]
//   --lib: another build's dist/ (e.g. a worktree of the previous commit) for its library and call layout
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { freePort, ROOT } from "./lib/procs.mjs";
import { setChecks } from "./lib/redis-cost.mjs";
import { respLoad } from "./lib/resp-load.mjs";

const { values: o } = parseArgs({
  options: {
    calls: { type: "string", default: "3000" },
    keys: { type: "string", default: "10000" },
    sets: { type: "string", default: "tb1,fw1,sw1,tb5,fw5" },
    lib: { type: "string", default: path.join(ROOT, "dist") },
  },
});
const calls = Number(o.calls);
const keys = Number(o.keys);
const scripts = await import(path.join(path.resolve(o.lib), "store/lua-library.js"));
const caseStudyLua = fs.readFileSync(path.join(ROOT, "bench/lua/case-study-token-bucket.lua"), "utf8");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-callgrind-"));
const port = await freePort();
const cli = (...args) => execFileSync("redis-cli", ["-p", String(port), ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
const valgrind = spawn(
  "valgrind",
  [
    "--tool=callgrind",
    "--instr-atstart=no",
    `--callgrind-out-file=${dir}/out.%p`,
    "redis-server",
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
  ],
  { stdio: "ignore" },
);
process.on("exit", () => {
  valgrind.kill("SIGKILL");
  fs.rmSync(dir, { recursive: true, force: true });
});
for (let i = 0; ; i++) {
  try {
    if (cli("PING").trim() === "PONG") break;
  } catch {
    if (i > 300) throw new Error("redis-server under valgrind did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
}
const control = (...args) => execFileSync("callgrind_control", [...args, String(valgrind.pid)], { stdio: "ignore" });

/** Instructions per call of one command sent `calls` times, on an empty keyspace. */
async function count(args) {
  cli("FLUSHALL");
  control("-z");
  control("-i", "on");
  const r = await respLoad({ port, calls, connections: 16, keys }, args);
  control("-i", "off");
  control("-d");
  if (r.errors) throw new Error(`${r.errors} of ${calls} calls failed: ${r.lastError}`);
  const newest = fs
    .readdirSync(dir)
    .map((f) => path.join(dir, f))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
  return Number(/^totals: (\d+)/m.exec(fs.readFileSync(newest, "utf8"))[1]) / calls;
}

const sha = cli("SCRIPT", "LOAD", caseStudyLua).trim();
const caseStudy = await count(["EVALSHA", sha, "1", "rl:__rand_int__", "20", "2", "10"]);
console.log(`reference token-bucket script: ${Math.round(caseStudy)} instructions per call`);
const libFile = path.join(dir, "lib.lua");
fs.writeFileSync(libFile, scripts.storeLibrary().code);
execFileSync("sh", ["-c", `redis-cli -p ${port} -x FUNCTION LOAD REPLACE < ${libFile}`], { stdio: "ignore" });
for (const set of o.sets.split(",")) {
  const checks = setChecks(set);
  const raw = scripts.scriptArgs(checks, undefined);
  const numKeys = Number(raw[0]);
  const args = raw.map((a, i) => (i >= 1 && i <= numKeys ? `${a}:__rand_int__` : a));
  const perCall = await count(["FCALL", scripts.applyScript().fn, ...args]);
  const perCheck = perCall / checks.length;
  console.log(`${set}: ${Math.round(perCall)} per call, ${Math.round(perCheck)} per check = ${(perCheck / caseStudy).toFixed(2)}x the reference script's`);
}
process.exit(0);
