// --workers N: one primary process forks N workers that each run `serve` on the same port (node:cluster).
// Where the kernel balances SO_REUSEPORT sockets (Linux, FreeBSD, ...), every worker listens on the port
// itself (TransportOptions.reusePort) and the kernel spreads new connections over them: the primary is out of
// the data path. net's listen({ reusePort: true }) binds in the worker (it counts as `exclusive`), never asking
// the primary for a handle. On other kernels the primary accepts every connection and hands it to a worker in
// turn.
// Either way the primary answers no calls itself: it checks the port, starts, restarts and stops the
// workers, and serves the HTTP ports once for the whole group (`services`, group-admin.ts).
// With SO_REUSEPORT a second sluice of the same user could join the port silently, so the primary first
// binds it alone (and fails when anyone holds it); and a worker that dies also resets the connections
// still queued on its own socket, not yet accepted (Envoy's failure mode answers those calls), where the
// primary's queue kept them for the other workers.
import { ENV } from "../../core/settings-table.js";
import cluster, { type Worker } from "node:cluster";
import net from "node:net";
import type { Logger } from "pino";
import { ListenError, logListenError, type ListenSetting } from "../admin/listen-error.js";

/** A worker that dies unexpectedly is restarted, at most this many times per window; then sluice stops. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

const PORT_ENV = ENV.WORKER_PORT;

interface ListeningMessage {
  sluice: "listening";
  fields: Record<string, unknown>;
}

function isListening(m: unknown): m is ListeningMessage {
  return typeof m === "object" && m !== null && (m as ListeningMessage).sluice === "listening";
}

export function isWorker(): boolean {
  return cluster.isWorker;
}

/** Kernels that spread connections over SO_REUSEPORT sockets (Node's reusePort docs); elsewhere the option fails or does not balance. */
const BALANCING_KERNELS = new Set<string>(["linux", "freebsd", "sunos", "aix"]);

/** Whether workers bind the port themselves (SO_REUSEPORT): where the kernel balances such sockets. */
export function useReusePort(platform: string = process.platform): boolean {
  return BALANCING_KERNELS.has(platform);
}

/** In a worker, the port the primary chose (the same for every worker, across restarts). */
export function workerPort(configured: number): number {
  const fromPrimary = cluster.isWorker ? Number(process.env[PORT_ENV]) : NaN;
  return Number.isInteger(fromPrimary) ? fromPrimary : configured;
}

/**
 * The `listening` line: logged by the process itself without workers; with workers, each says
 * `worker listening` and the primary logs `listening` once all of them are.
 */
export function announceListening(logger: Logger, fields: Record<string, unknown>): void {
  if (!cluster.isWorker) {
    logger.info(fields, "listening");
    return;
  }
  logger.info({ ...fields, worker: cluster.worker?.id, pid: process.pid }, "worker listening");
  process.send?.({ sluice: "listening", fields } satisfies ListeningMessage);
}

interface PrimaryOptions {
  workers: number;
  host: string;
  port: number;
  /** How long workers get to finish in-flight calls after SIGTERM before they are killed. */
  shutdownGraceMs: number;
  /** How long workers keep serving after SIGTERM before their drain starts (SLUICE_DRAIN_DELAY_MS). */
  drainDelayMs?: number;
  /** The workers bind with SO_REUSEPORT (useReusePort); false: the primary accepts and hands connections out. */
  reusePort: boolean;
  /** How the gRPC port is moved, for the error when it is taken. */
  grpcSetting: ListenSetting;
  logger: Logger;
  /**
   * What the primary serves for the whole group (group-admin.ts: the admin and reference HTTP ports),
   * started before the workers; its fields join the `listening` line. Undefined: it could not start.
   */
  services?: (group: WorkerGroup) => Promise<GroupServices | undefined>;
  /** SIGTERM / SIGINT as `sluice serve` catches them from its start (cli/stop-signals.ts); absent: caught here from now on. */
  stop?: { requested(): string | undefined; signal: Promise<string> };
}

/** A live worker and its slot (0..N-1; a restarted worker takes the slot of the one it replaces). */
export interface GroupMember {
  slot: number;
  worker: Worker;
}

export interface WorkerGroup {
  size: number;
  /** The workers that announced they listen, by slot. */
  members(): GroupMember[];
  /** Called when a worker exits (before its replacement is forked). */
  onExit(listener: (workerId: number, slot: number) => void): void;
}

export interface GroupServices {
  fields: Record<string, unknown>;
  close(): Promise<void>;
}

/** Runs the primary until it is stopped; resolves with the exit code (0 when every worker exited cleanly). */
export async function runPrimary(o: PrimaryOptions): Promise<number> {
  // Port 0: choose the port once, so every worker and every restarted worker share it. A port that is
  // taken fails here, before any worker starts (and, with SO_REUSEPORT, instead of sharing it).
  let port: number;
  try {
    port = await bindAlone(o.host, o.port);
  } catch (err) {
    logListenError(o.logger, new ListenError(err as Error, o.host, o.port, o.grpcSetting));
    return 1;
  }
  const balance = o.reusePort ? "reuseport" : "primary";
  const listening = new Set<number>();
  const restarts: number[] = [];
  let stopping = false;
  let exitCode = 0;
  let announced = false;
  const slotOf = new Map<number, number>();
  const exitListeners: ((workerId: number, slot: number) => void)[] = [];
  const group: WorkerGroup = {
    size: o.workers,
    members: () =>
      Object.values(cluster.workers ?? {})
        .filter((w): w is Worker => w !== undefined && listening.has(w.id) && slotOf.has(w.id))
        .map((worker) => ({ slot: slotOf.get(worker.id)!, worker }))
        .sort((a, b) => a.slot - b.slot),
    onExit: (l) => void exitListeners.push(l),
  };
  const services = o.services ? await o.services(group) : undefined;
  if (o.services && !services) return 1;

  // Workers not yet exited, kept here: cluster.workers drops a worker only once it has both exited and
  // disconnected, in either order, so at the last 'exit' it may still list it and the stop would never finish.
  const alive = new Set<number>();
  const fork = (slot: number): Worker => {
    const w = cluster.fork({ [PORT_ENV]: String(port) });
    slotOf.set(w.id, slot);
    alive.add(w.id);
    return w;
  };

  return new Promise<number>((resolve) => {
    const stop = (reason: string, code: number) => {
      if (code !== 0) exitCode = code;
      if (stopping) return;
      stopping = true;
      o.logger.info({ reason }, "shutting down");
      const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
      if (alive.size === 0) return finish();
      for (const w of workers) w.process.kill("SIGTERM");
      // Bounded: workers that outlive their own drain delay and grace period (plus store close) are killed.
      setTimeout(
        () => {
          for (const w of Object.values(cluster.workers ?? {})) w?.process.kill("SIGKILL");
        },
        (o.drainDelayMs ?? 0) + o.shutdownGraceMs + 5000,
      ).unref();
    };
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      const done = () => {
        o.logger.info({ exitCode }, "stopped");
        resolve(exitCode);
      };
      if (services) services.close().then(done, done);
      else done();
    };

    cluster.on("message", (worker, message) => {
      if (!isListening(message)) return;
      listening.add(worker.id);
      if (!announced && listening.size === o.workers) {
        announced = true;
        o.logger.info({ ...message.fields, ...services?.fields, port, workers: o.workers, balance }, "listening");
      }
    });

    cluster.on("exit", (worker, code, signal) => {
      alive.delete(worker.id);
      const wasListening = listening.delete(worker.id);
      const slot = slotOf.get(worker.id) ?? 0;
      slotOf.delete(worker.id);
      for (const l of exitListeners) l(worker.id, slot);
      const clean = code === 0 && signal === null;
      if (stopping) {
        // Ended by the SIGTERM the stop sent it: a worker still in Node's own start cannot catch it yet.
        if (!clean && signal !== "SIGTERM") exitCode = 1;
        if (alive.size === 0) finish();
        return;
      }
      if (!wasListening) {
        // Failed before serving (bad rules, port taken): a restart would fail the same way.
        o.logger.error({ worker: worker.id, code, signal }, "worker failed to start");
        return stop("worker failed to start", 1);
      }
      const now = Date.now();
      while (restarts.length > 0 && restarts[0] < now - RESTART_WINDOW_MS) restarts.shift();
      if (restarts.length >= MAX_RESTARTS) {
        o.logger.error({ worker: worker.id, code, signal, restarts: restarts.length }, "worker died too often; stopping");
        return stop("workers keep dying", 1);
      }
      restarts.push(now);
      o.logger.error({ worker: worker.id, code, signal }, "worker died; restarting it");
      fork(slot);
    });

    if (o.stop) {
      void o.stop.signal.then((signal) => stop(signal, 0));
      // Stopped while the ports opened: no worker is started only to be stopped.
      if (o.stop.requested()) return;
    } else {
      process.once("SIGTERM", () => stop("SIGTERM", 0));
      process.once("SIGINT", () => stop("SIGINT", 0));
    }
    for (let i = 0; i < o.workers; i++) fork(i);
  });
}

/** Binds host:port without SO_REUSEPORT (0 = any free port), closes it again, and gives the port. */
function bindAlone(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on("error", reject);
    srv.listen({ port, host }, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
