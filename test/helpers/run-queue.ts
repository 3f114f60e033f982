// How long the host kept processes waiting for a CPU while a test measured them. A server that waited on
// the run queue (every core taken by other work) was silent all that time: a test that times sluice or a
// store on a busy host bounds what it asserts by this, as the kernel accounts it. Linux's
// /proc/PID/task/TID/schedstat gives a thread's time runnable but not running (its run-queue wait), added
// whole when the thread next gets a CPU, so a wait is never split across two samples (several may share one).
// Elsewhere (no /proc) nothing is sampled and every wait reads 0: tests then assert as on a quiet host.
// A thread that ends right after a wait (a watchdog that gets a CPU and kills its process) takes that wait
// with it: with `endedWaits`, a thread seen runnable and not run in the samples before its end adds that time.
import fs from "node:fs";
import { sleep, until } from "./wait.js";

export interface RunQueueWatch {
  /**
   * The most time `pid` waited for a CPU within any `spanMs` between two samples, in ms; a single sample
   * interval longer than `spanMs` counts whole. With `from` and `to` (performance.now() ms): only waits that may
   * have overlapped [from, to] (placed as in waitedDuring).
   */
  waitedMs(pid: number, spanMs: number, from?: number, to?: number): number;
  /**
   * The time `pid` waited for a CPU in waits that may have overlapped [from, to] (performance.now() ms): each
   * sample interval's waits are placed anywhere from their total before the interval began to its end.
   */
  waitedDuring(pid: number, from: number, to: number): number;
  /** Samples taken of `pid` (0: nothing is known of it). */
  samples(pid: number): number;
  stop(): void;
}

/**
 * One thread's schedstat (time on a CPU and run-queue wait so far, in ms; times it got a CPU), and with `state`
 * its state letter (R: running or runnable); undefined when it cannot be read (gone, or no /proc).
 */
function schedOf(pid: number, tid: number, state = false): { ranMs: number; delay: number; runs: number; state?: string } | undefined {
  try {
    const [ran, delay, runs] = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ").map(Number);
    if (!state) return { ranMs: ran / 1e6, delay: delay / 1e6, runs };
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    return { ranMs: ran / 1e6, delay: delay / 1e6, runs, state: stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) };
  } catch {
    return undefined;
  }
}

/** CPU time a process's main thread has used, in ms (its schedstat); undefined once it is gone. */
export function mainThreadRanMs(pid: number): number | undefined {
  return schedOf(pid, pid)?.ranMs;
}

function threadsOf(pid: number): number[] {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    return [];
  }
}

/**
 * Samples each pid's run-queue wait every `everyMs` until stop(): its main thread's (the event loop of Redis or
 * Node), or for the pids in `allThreads` the most any of its threads waited in each sample interval (a Node
 * process's main thread also waits on its GC helpers when they wait for a CPU; threads that waited side by side
 * held it back once, not once each).
 */
export function watchRunQueue(pids: number[], o: { everyMs?: number; allThreads?: number[]; endedWaits?: boolean } = {}): RunQueueWatch {
  // delay: the process's wait so far (for allThreads, the sum over intervals of the most one thread waited).
  // waiting: per thread, since when it has been seen runnable without a run or CPU time (endedWaits only).
  const series = new Map<
    number,
    {
      at: number[];
      delay: number[];
      tids: number[];
      byTid: Map<number, number>;
      waiting: Map<number, { since: number; runs: number; ranMs: number; seen: number }>;
    }
  >(pids.map((p) => [p, { at: [], delay: [], tids: o.allThreads?.includes(p) ? threadsOf(p) : [p], byTid: new Map(), waiting: new Map() }]));
  let samples = 0;
  const sample = () => {
    const at = performance.now();
    // Threads come and go (a thread pool grows): listed again every 200 samples.
    if (++samples % 200 === 0) for (const p of o.allThreads ?? []) if (series.has(p)) series.get(p)!.tids = threadsOf(p);
    for (const [pid, s] of series) {
      let read = false;
      let most = 0;
      for (const tid of s.tids) {
        const now = schedOf(pid, tid, o.endedWaits);
        if (now === undefined) {
          // Gone: the wait it was last seen in never reached the kernel's account.
          const w = s.waiting.get(tid);
          s.waiting.delete(tid);
          if (w) {
            most = Math.max(most, w.seen - w.since);
            read = true;
          }
          continue;
        }
        const d = now.delay;
        const before = s.byTid.get(tid);
        s.byTid.set(tid, d);
        // A thread first seen counts from its first sample on.
        if (before !== undefined) most = Math.max(most, d - before);
        read = true;
        if (o.endedWaits) {
          // Runnable, and neither run again nor given CPU time since it was first seen so: waiting all along.
          const w = s.waiting.get(tid);
          if (now.state !== "R") s.waiting.delete(tid);
          else if (w && w.runs === now.runs && w.ranMs === now.ranMs) w.seen = at;
          else s.waiting.set(tid, { since: at, runs: now.runs, ranMs: now.ranMs, seen: at });
        }
      }
      if (!read) continue;
      s.at.push(at);
      s.delay.push((s.delay.at(-1) ?? 0) + most);
    }
  };
  sample();
  const timer = setInterval(sample, o.everyMs ?? 5);
  const of = (pid: number) => {
    const s = series.get(pid);
    if (!s) throw new Error(`pid ${pid} is not watched`);
    return s;
  };
  return {
    waitedMs(pid, spanMs, from = -Infinity, to = Infinity) {
      const s = of(pid);
      let most = 0;
      // For each sample j, the earliest sample i within spanMs before it (j - 1 at least).
      for (let i = 0, j = 1; j < s.at.length; j++) {
        while (i < j - 1 && s.at[j] - s.at[i] > spanMs) i++;
        const waited = s.delay[j] - s.delay[i];
        // The waits may have begun up to their total before sample i.
        if (s.at[j] < from || s.at[i] - waited > to) continue;
        most = Math.max(most, waited);
      }
      return Math.round(most);
    },
    waitedDuring(pid, from, to) {
      const s = of(pid);
      let sum = 0;
      for (let j = 1; j < s.at.length; j++) {
        const waited = s.delay[j] - s.delay[j - 1];
        if (waited > 0 && s.at[j - 1] - waited <= to && s.at[j] >= from) sum += waited;
      }
      return Math.round(sum);
    },
    samples: (pid) => series.get(pid)?.at.length ?? 0,
    stop: () => clearInterval(timer),
  };
}

export interface HostHeldRetry {
  /** Processes whose wait for a CPU explains a failed store call (the Redis servers of the run). */
  pids: number[];
  /** The store timeout: a wait as long, within twice that, silences a store past it. */
  timeoutMs: number;
  /** Runs at most. */
  attempts: number;
  /** Failed store calls so far (sluice_store_errors_total), read before and after a run. */
  storeFailures: () => Promise<number>;
  /** Called before a failed run is run again (to stop what it started). */
  beforeAgain?: () => Promise<void>;
  /** A failure that shows the host's doing by itself (a step's premise broken on the store's clock): run again. */
  hostsDoing?: (err: unknown) => boolean;
}

/**
 * Runs `run` (given its attempt, from 1); a run that throws is run again only where its store calls failed and the
 * host kept one of `pids` waiting for a CPU for the store timeout meanwhile (a store silenced by the host, not by
 * sluice), or where `hostsDoing` says so. Any other failure, and the last run's, is thrown as it is.
 */
export async function runAgainWhereHostHeld(o: HostHeldRetry, run: (attempt: number) => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const failedBefore = await o.storeFailures();
    const runQueue = watchRunQueue(o.pids);
    try {
      await run(attempt);
      return;
    } catch (err) {
      await sleep(2 * o.timeoutMs); // a wait still going on is sampled once it ends
      runQueue.stop();
      const failed = (await o.storeFailures().catch(() => failedBefore)) - failedBefore;
      const waited = Math.max(...o.pids.map((p) => runQueue.waitedMs(p, 2 * o.timeoutMs)));
      const held = failed > 0 && waited >= o.timeoutMs;
      if (!(held || o.hostsDoing?.(err)) || attempt === o.attempts) throw err;
      const why = held ? `${failed} store calls failed while the host kept Redis waiting ${waited} ms for a CPU (store timeout ${o.timeoutMs} ms)` : "the host";
      console.warn(`run ${attempt}: ${why}; once more. It failed with: ${(err as Error).message.split("\n")[0]}`);
      await o.beforeAgain?.();
    } finally {
      runQueue.stop();
    }
  }
}

/**
 * Waits (wait.ts's until, every `everyMs`) for `ready`, for as long as the host allows: it gives up once `boundMs`
 * have passed beyond `heldMs(from, now)`, what the host took from the awaited work since `from` (waits for a CPU,
 * this process's stalls), and 5 s more (a wait still going on is accounted at its end), or after `capMs` in all.
 * Returns whether `ready` held, when, and the host's part then: the caller asserts `ms - heldMs` against its bound.
 */
export async function untilWithinHostTime(
  ready: () => boolean | Promise<boolean>,
  o: { from: number; boundMs: number; heldMs: (from: number, to: number) => number; capMs: number; what: string; everyMs?: number },
): Promise<{ ready: boolean; ms: number; heldMs: number }> {
  let done = { ready: false, ms: 0, heldMs: 0 };
  await until(
    async () => {
      const ok = await ready();
      const now = performance.now();
      const held = o.heldMs(o.from, now);
      done = { ready: ok, ms: now - o.from, heldMs: held };
      return ok || now - o.from - held > o.boundMs + 5_000;
    },
    o.capMs,
    () => `${o.what} (${Math.round(done.ms)} ms, the host's ${Math.round(done.heldMs)} ms of it)`,
    o.everyMs ?? 20,
  );
  return done;
}
