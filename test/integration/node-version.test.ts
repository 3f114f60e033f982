// Any machine's Node: the README's commands on a machine whose own `node` is older than sluice needs (here
// the machine's /usr/bin/node, Node 20). `sluice` itself refuses at once with one line naming the version it
// needs and how to get it; `npm ci` and `npm start` in a clean clone run Node 24 from npm's `node` package
// (a devDependency, first on PATH in npm's scripts) and answer calls: never a server that hangs them.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { descriptor, OK, rlsClient } from "../helpers/grpc-client.js";
import { ROOT } from "../helpers/sluice.js";
import { track } from "../helpers/children.js";

/** The machine's own node, when it is older than the one sluice needs (else these cases have nothing to show). */
const MACHINE_NODE = "/usr/bin/node";
const machineMajor = (() => {
  const r = spawnSync(MACHINE_NODE, ["-p", "process.versions.node.split('.')[0]"], { encoding: "utf8" });
  return r.status === 0 ? Number(r.stdout.trim()) : undefined;
})();
const NEEDED = Number(/>=(\d+)/.exec(JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).engines.node)![1]);
const olderNode = machineMajor !== undefined && machineMajor < NEEDED;
/** PATH with the machine's node first, as a user's shell has it. */
const machinePath = `${path.dirname(MACHINE_NODE)}:${(process.env.PATH ?? "")
  .split(":")
  .filter((d) => !d.includes("node"))
  .join(":")}`;

const refusal = (version: string) =>
  `sluice: needs Node.js ${NEEDED} or newer, this is ${version}: install Node ${NEEDED} (https://nodejs.org, \`nvm install ${NEEDED}\`), or run \`npm start\` in sluice's directory, which brings its own\n`;

describe.skipIf(!olderNode)(`on the machine's Node ${machineMajor}`, () => {
  const version = olderNode ? execFileSync(MACHINE_NODE, ["--version"], { encoding: "utf8" }).trim() : "";

  it("`sluice --version` and `sluice serve` refuse at once with the one line", () => {
    for (const args of [["--version"], ["serve"]]) {
      const started = Date.now();
      const r = spawnSync(MACHINE_NODE, [path.join(ROOT, "dist/bin.js"), ...args], { cwd: ROOT, encoding: "utf8", timeout: 10_000 });
      expect([r.status, r.stdout, r.stderr]).toEqual([1, "", refusal(version)]);
      expect(Date.now() - started).toBeLessThan(5_000);
    }
  });

  // A clean clone of the commit under test (uncommitted changes are not in it), then the README's commands.
  const clone = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-clone-"));
  let npmStart: ReturnType<typeof spawn> | undefined;
  afterAll(() => {
    // npm start runs sh and node under npm: the whole group goes.
    if (npmStart?.pid !== undefined && npmStart.exitCode === null) process.kill(-npmStart.pid, "SIGKILL");
    fs.rmSync(clone, { recursive: true, force: true });
  });

  it("a clean clone: npm ci builds with Node 24 from npm's node package, npm start answers calls", { timeout: 300_000 }, async () => {
    const env = { ...process.env, PATH: machinePath };
    const head = execFileSync("git", ["-C", ROOT, "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
    execFileSync("git", ["clone", "--quiet", "--no-checkout", ROOT, clone]);
    execFileSync("git", ["-C", clone, "checkout", "--quiet", head]);
    expect(execFileSync("node", ["--version"], { env, encoding: "utf8" }).trim()).toBe(version);
    // `npm install` of the README, reproducibly: the lockfile's versions (and the local cache when it has them).
    execFileSync("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund"], { cwd: clone, env, stdio: "ignore", timeout: 240_000 });
    expect(execFileSync(path.join(clone, "node_modules/.bin/node"), ["--version"], { encoding: "utf8" }).trim()).toMatch(new RegExp(`^v${NEEDED}\\.`));
    expect(fs.existsSync(path.join(clone, "dist/bin.js"))).toBe(true); // prepare built it

    npmStart = track(
      spawn("npm", ["start", "--", "--port", "0", "--admin-port", "0"], { cwd: clone, env, detached: true, stdio: ["ignore", "pipe", "pipe"] }),
      { group: true },
    );
    const port = await new Promise<number>((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => reject(new Error(`npm start did not listen:\n${out}`)), 30_000);
      const read = (c: Buffer) => {
        out += c.toString();
        const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      };
      npmStart!.stdout!.on("data", read);
      npmStart!.stderr!.on("data", read);
      npmStart!.on("exit", (code) => reject(new Error(`npm start exited with ${code}:\n${out}`)));
    });
    const c = rlsClient(port);
    try {
      const res = await c.shouldRateLimit({ domain: "edge", descriptors: [descriptor({ remote_address: "203.0.113.7" })] }, 5_000);
      expect([res.overall_code, res.statuses[0].limit_remaining]).toEqual([OK, 119]);
    } finally {
      c.close();
    }
  });
});
