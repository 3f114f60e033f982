// The child-process side of a rule compile (compile-job.ts): jobs in turn (one per load, or two halves of a
// first load). Its domain chunks are serialized here (v8.serialize) into one buffer, which arrives as one
// piece, so that the event loop deserializes them one chunk per step (compiler.ts). A process, not a worker
// thread: when it exits, all it touched (heap, allocator arenas, the node binary's pages a thread's start
// maps in) is given back; an ended worker thread left about 23 MiB resident in sluice for good.
import { readdirSync } from "node:fs";
import { constants, setPriority } from "node:os";
import { serialize } from "node:v8";
import { Worker } from "node:worker_threads";
import { runJob, type JobEntry, type JobInput, type JobOutput } from "./compile-job.js";

export interface CompileRequest<S> {
  input: JobInput;
  source: S;
}

/** One job's answer: its output, or why it failed. */
export type CompileAnswer = { id: number; out: JobOutput } | { id: number; error: string };

/**
 * Copies every chunk into one buffer and points the chunks at it: one buffer to send, received as one
 * allocation, large enough to be given back to the system when it is freed (many small ones would stay in
 * the allocator).
 */
function gather(out: JobOutput): ArrayBuffer {
  const chunks = out.domains.flatMap((d) => d.chunks as Uint8Array[]);
  const all = new ArrayBuffer(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const d of out.domains) {
    d.chunks = (d.chunks as Uint8Array[]).map((c) => {
      const view = new Uint8Array(all, at, c.byteLength);
      view.set(c);
      at += c.byteLength;
      return view;
    });
  }
  return all;
}

/**
 * Errors a load sends at most; the rest are counted. A file can hold 100,000 errors (29 MiB of log lines once), and
 * what crosses is read on sluice's event loop: the first ones are what logs and /readyz show, `sluice check` all.
 */
export const SENT_ERRORS = 100;

/** The first SENT_ERRORS errors and their total. */
function boundErrors(out: JobOutput): void {
  if (out.errors.length <= SENT_ERRORS) return;
  out.errorCount = out.errors.length;
  out.errors = out.errors.slice(0, SENT_ERRORS);
}

/** The argument that starts a compile process at the lowest CPU priority (reloads, while sluice serves). */
export const LOWEST_PRIORITY_ARG = "--lowest-priority";

/**
 * Lowest CPU priority for this process: on a busy host the event loop that answers calls gets the CPU first,
 * and a reload takes longer instead. Linux gives each thread its own priority, and V8's threads (parallel
 * and concurrent GC, the compiler) exist before this runs: each is lowered, not only the main one (threads
 * started later inherit it).
 */
function lowestPriority(spare: ReadonlySet<number>): void {
  let threads = [0];
  try {
    threads = threadIds();
  } catch {
    // No /proc (not Linux): the process's priority is the one to set.
  }
  for (const tid of threads) {
    if (spare.has(tid)) continue;
    try {
      setPriority(tid, constants.priority.PRIORITY_LOW);
    } catch {
      // Not allowed here, or the thread has ended: it runs at normal priority.
    }
  }
}

/** How often the watchdog looks whether sluice is still this process's parent. */
const PARENT_CHECK_MS = 100;

function threadIds(): number[] {
  return readdirSync("/proc/self/task").map(Number);
}

/**
 * Ends this process once sluice is gone, even in the middle of a job. The IPC channel's `disconnect` is an event of
 * the event loop, which a job holds for seconds; a thread of its own sees the parent change (the process is given
 * to another when its parent dies) and ends the process at once. Returns the watchdog's thread ids: they keep
 * their priority, so that on a busy host a lowest-priority job does not starve the watchdog too.
 */
function endWithParent(): Set<number> {
  let before: Set<number> | undefined;
  try {
    before = new Set(threadIds());
  } catch {
    // No /proc: nothing to tell apart.
  }
  // No resourceLimits: a worker's own start needs more heap than a tight limit leaves, and dies of it.
  const watchdog = new Worker(
    `const ppid = process.ppid;
     setInterval(() => { if (process.ppid !== ppid) process.kill(process.pid, "SIGKILL"); }, ${PARENT_CHECK_MS});`,
    { eval: true },
  );
  // Without it the IPC channel's disconnect still ends this process, once the job is done.
  watchdog.on("error", () => undefined);
  watchdog.unref();
  // The worker's thread is created by the constructor: the ids new since then are its own.
  if (!before) return new Set();
  try {
    return new Set(threadIds().filter((tid) => !before.has(tid)));
  } catch {
    return new Set();
  }
}

/** In a compile process: runs each job on the entries of its source and sends its output. */
export function serveJobs<S>(entriesOf: (source: S) => { entries: JobEntry[]; warnings: string[] }): void {
  const watchdog = endWithParent();
  if (process.argv.includes(LOWEST_PRIORITY_ARG)) lowestPriority(watchdog);
  // sluice gone (or done with it): nothing to compile for.
  process.on("disconnect", () => process.exit(0));
  process.on("message", (req: CompileRequest<S> & { id: number }) => {
    let answer: CompileAnswer;
    try {
      const { entries, warnings } = entriesOf(req.source);
      const out = runJob(req.input, entries, warnings, (c) => serialize(c));
      // A load refused keeps nothing: only the chunks of a valid one travel.
      if (out.errors.length === 0) gather(out);
      else boundErrors(out);
      answer = { id: req.id, out };
    } catch (err) {
      answer = { id: req.id, error: (err as Error).message };
    }
    // sluice may have gone meanwhile: then the answer has no reader, and this process ends.
    process.send!(answer, undefined, undefined, (err) => {
      if (err) process.exit(0);
    });
  });
}
