// Starts real `sluice serve` processes (the built dist/bin.js, the `sluice` command) and waits for their "listening" line.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import fs from "node:fs";
import os from "node:os";
import { ReferenceReader } from "../../src/settings/reference/reader.js";
import { track } from "./children.js";
import { until } from "./wait.js";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const MAIN = path.join(ROOT, "dist/bin.js");

/** The node flags of the sluice bin's shebang (its memory setting): tests run sluice the way it is deployed. */
export function binNodeFlags(file = MAIN): string[] {
  const first = fs.readFileSync(file, "utf8").split("\n", 1)[0];
  const m = /^#!\/usr\/bin\/env (?:-S )?node((?: \S+)*)$/.exec(first);
  if (!m) throw new Error(`${file}: unexpected shebang '${first}'`);
  return m[1].split(" ").filter(Boolean);
}

export interface SluiceProcess {
  port: number;
  /** The admin HTTP port (the helper passes `--admin-port 0` unless args name one). */
  adminPort: number;
  proc: ChildProcess;
  logs: string[];
  /** Resolves with the first JSON log line (parsed) that matches, waiting up to timeoutMs. */
  waitForLog(match: (line: Record<string, any>) => boolean, timeoutMs?: number): Promise<Record<string, any>>;
  /** Resolves with the exit code once the process exited (whoever stopped it). */
  exited: Promise<number | null>;
  /** SIGTERM to the node process itself; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Under the reference's environment sluice opens its HTTP and debug ports at 8080 and 6070 on every
 * address: tests take free ones on loopback unless they name them.
 */
function referencePorts(env: Record<string, string>): Record<string, string> {
  if (!new ReferenceReader(env, () => false).referenceEnvironment()) return {};
  const out: Record<string, string> = {};
  if (env.PORT === undefined) Object.assign(out, { PORT: "0", ...(env.HOST === undefined ? { HOST: "127.0.0.1" } : {}) });
  if (env.DEBUG_PORT === undefined) Object.assign(out, { DEBUG_PORT: "0", ...(env.DEBUG_HOST === undefined ? { DEBUG_HOST: "127.0.0.1" } : {}) });
  return out;
}

/**
 * `bare`: `sluice serve` with these args and this environment alone (no --host, --port or --admin-port
 * and no SLUICE_* variable added): settings come from what the test gives, as in a Deployment.
 * `startTimeoutMs`: how long the start may take (rule sets of 100,000 descriptors need more than the default).
 * `onSpawn`: called with the process at once (to watch it from its first moment, e.g. its waits for a CPU).
 */
export async function startSluice(
  args: string[],
  env: Record<string, string> = {},
  opts: { bare?: boolean; startTimeoutMs?: number; onSpawn?: (proc: ChildProcess) => void } = {},
): Promise<SluiceProcess> {
  const startTimeoutMs = opts.startTimeoutMs ?? 15_000;
  const admin = args.includes("--admin-port") ? [] : ["--admin-port", "0"];
  const flags = opts.bare ? [] : ["--host", "127.0.0.1", "--port", "0", ...admin];
  const proc = track(
    spawn(process.execPath, [...binNodeFlags(), MAIN, "serve", ...flags, ...args], {
      cwd: ROOT,
      env: opts.bare ? { PATH: process.env.PATH ?? "", ...env } : { ...process.env, SLUICE_LOG_LEVEL: "info", ...referencePorts(env), ...env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  opts.onSpawn?.(proc);
  const logs: string[] = [];
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  const { port, adminPort } = await new Promise<{ port: number; adminPort: number }>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL"); // never leave a half-started process behind
      reject(new Error(`sluice did not start:\n${logs.join("\n")}`));
    }, startTimeoutMs);
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
            resolve({ port: j.port, adminPort: j.adminPort });
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
  const parsed = (line: string): Record<string, any> | undefined => {
    try {
      return JSON.parse(line);
    } catch {
      return undefined;
    }
  };
  return {
    port,
    adminPort,
    proc,
    logs,
    exited,
    async waitForLog(match, timeoutMs = 10_000) {
      let hit: Record<string, any> | undefined;
      const found = () => logs.some((line) => (hit = parsed(line)) && match(hit));
      await until(found, timeoutMs, () => `a matching log line:\n${logs.join("\n")}`);
      return hit!;
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      return exited;
    },
  };
}

/** Runs the CLI to completion (for `check` and usage errors). */
const RUN_CLI_TIMEOUT_MS = 30_000;

export function runCli(args: string[], env: Record<string, string> = {}) {
  // Bounded: a command expected to exit that serves instead fails the test rather than hanging the suite.
  const r = spawnSync(process.execPath, [...binNodeFlags(), MAIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: RUN_CLI_TIMEOUT_MS,
    killSignal: "SIGKILL",
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A temporary rule directory holding the given files. */
export function ruleDir(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-rules-"));
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
  return dir;
}
