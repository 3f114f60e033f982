// Starts real `sluice serve` processes (the built dist/main.js) and waits for their "listening" line.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import fs from "node:fs";
import os from "node:os";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const MAIN = path.join(ROOT, "dist/main.js");

export interface SluiceProcess {
  port: number;
  proc: ChildProcess;
  logs: string[];
  /** SIGTERM to the node process itself; resolves with the exit code. */
  stop(): Promise<number | null>;
}

export async function startSluice(args: string[], env: Record<string, string> = {}): Promise<SluiceProcess> {
  const proc = spawn(process.execPath, [MAIN, "serve", "--host", "127.0.0.1", "--port", "0", ...args], {
    cwd: ROOT,
    env: { ...process.env, SLUICE_LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs: string[] = [];
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sluice did not start:\n${logs.join("\n")}`)), 15_000);
    let buf = "";
    proc.stdout!.on("data", (chunk: Buffer) => {
      buf += chunk.toString();
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        logs.push(line);
        try {
          const j = JSON.parse(line);
          if (j.msg === "listening") {
            clearTimeout(timer);
            resolve(j.port);
          }
        } catch {
          /* not JSON */
        }
      }
    });
    proc.stderr!.on("data", (chunk: Buffer) => logs.push(chunk.toString()));
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`sluice exited with ${code} before listening:\n${logs.join("\n")}`));
    });
  });
  return {
    port,
    proc,
    logs,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      return exited;
    },
  };
}

/** Runs the CLI to completion (for `check` and usage errors). */
export function runCli(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [MAIN, ...args], { cwd: ROOT, env: { ...process.env, ...env }, encoding: "utf8" });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A temporary rule directory holding the given files. */
export function ruleDir(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-rules-"));
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
  return dir;
}
