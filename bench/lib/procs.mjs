// Child processes of the harness: sluice, the baseline and redis-server, each on a free port and
// stopped by its own pid.
import { execFile, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Starts a node server that logs a JSON {"msg":"listening","port":N} line; resolves once it did, with
 * the line's adminPort when it has one (sluice).
 */
export function startListening(script, args, env = {}, nodeArgs = [], timeoutMs = 20_000) {
  const proc = spawn(process.execPath, [...nodeArgs, script, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs = [];
  const exited = new Promise((resolve) => proc.on("exit", (code) => resolve(code)));
  const port = new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`${script} did not log "listening" within ${timeoutMs / 1000} s:\n${logs.join("\n")}`));
    }, timeoutMs);
    let buf = "";
    proc.stdout.on("data", (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (logs.length < 200) logs.push(line);
        try {
          const j = JSON.parse(line);
          if (j.msg === "listening") {
            clearTimeout(timer);
            resolve({ port: j.port, adminPort: j.adminPort });
          }
        } catch {
          /* not JSON */
        }
      }
    });
    proc.stderr.on("data", (chunk) => logs.push(String(chunk)));
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with ${code} before listening:\n${logs.join("\n")}`));
    });
  });
  return port.then((p) => ({
    port: p.port,
    adminPort: p.adminPort,
    pid: proc.pid,
    logs,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  }));
}

export function run(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { maxBuffer: 64 * 1024 * 1024, ...opts }, (err, stdout, stderr) =>
      err ? reject(Object.assign(err, { stdout, stderr })) : resolve(stdout),
    );
  });
}

/**
 * The node flags a script's shebang carries (`#!/usr/bin/env -S node --flag ...`): dist/bin.js keeps
 * sluice's V8 settings there (as `npm start` and the Docker image run it), so the bench runs sluice with them.
 */
export function shebangNodeFlags(script) {
  const first = fs.readFileSync(script, "utf8").split("\n", 1)[0];
  const m = /^#!\S*env\s+(?:-S\s+)?node((?:\s+--?\S+)*)\s*$/.exec(first);
  return m ? m[1].trim().split(/\s+/).filter(Boolean) : [];
}
