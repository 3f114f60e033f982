// Throwaway redis-server processes for tests, on free ports, without persistence.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { freePort } from "./ports.js";
import { track } from "./children.js";
import { sleep } from "./wait.js";

export interface RedisProcess {
  port: number;
  url: string;
  proc: ChildProcess;
  /** Graceful stop; resolves once the process exited. */
  stop(): Promise<void>;
  /** Signal the process (default SIGKILL: a crash). */
  kill(signal?: NodeJS.Signals): void;
  /** redis-cli against this server; resolves with its stdout. */
  cli(...args: string[]): Promise<string>;
  /** Start again on the same port (after kill or stop); empty, as there is no persistence. */
  restart(): Promise<void>;
}

export async function startRedis(opts: { args?: string[]; port?: number } = {}): Promise<RedisProcess> {
  const port = opts.port ?? (await freePort());
  const cli = (...args: string[]) =>
    new Promise<string>((resolve, reject) => {
      execFile("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args], (err, stdout) => (err ? reject(err) : resolve(stdout)));
    });
  const r: RedisProcess = {
    port,
    url: `redis://127.0.0.1:${port}`,
    proc: await spawnRedis(port, opts.args ?? [], cli),
    stop: () => stopProc(r.proc, "SIGTERM"),
    kill: (signal = "SIGKILL") => {
      r.proc.kill(signal);
    },
    cli,
    restart: async () => {
      await stopProc(r.proc, "SIGKILL");
      r.proc = await spawnRedis(port, opts.args ?? [], cli);
    },
  };
  return r;
}

async function spawnRedis(port: number, args: string[], cli: (...a: string[]) => Promise<string>): Promise<ChildProcess> {
  const proc = track(
    spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  let output = "";
  proc.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  proc.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) break;
    if ((await cli("PING").catch(() => "")).trim() === "PONG") return proc;
    await sleep(20);
  }
  proc.kill("SIGKILL");
  throw new Error(`redis-server on port ${port} did not start:\n${output}`);
}

function stopProc(proc: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    proc.once("exit", () => resolve());
    proc.kill(signal);
  });
}

/** Script calls (FCALL, EVALSHA, EVAL) the servers ran since they started or their last CONFIG RESETSTAT, summed. */
export async function scriptCalls(...nodes: RedisProcess[]): Promise<number> {
  let total = 0;
  for (const n of nodes) {
    for (const m of (await n.cli("INFO", "commandstats")).matchAll(/^cmdstat_(?:fcall|evalsha|eval):calls=(\d+)/gm)) total += Number(m[1]);
  }
  return total;
}
