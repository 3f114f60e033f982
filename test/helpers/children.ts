// Every process a test starts (sluice, redis-server, sentinels, cluster nodes, fixtures) is tracked here,
// so none outlives its test file: test/helpers/children-setup.ts (a vitest setup file) kills what a failed
// test started, whatever is left when the file ends, and everything when the worker exits or is signalled.
import type { ChildProcess } from "node:child_process";

interface Tracked {
  proc: ChildProcess;
  /** Started detached (its own process group): the whole group is killed. */
  group: boolean;
  /** The test that started it; undefined when a hook outside a test (beforeAll) did. */
  testId?: string;
}

const live = new Set<Tracked>();
let currentTest: string | undefined;

/** Tracks `proc` until it exits; returns it. `group`: it was spawned detached, kill its process group. */
export function track<T extends ChildProcess>(proc: T, o: { group?: boolean } = {}): T {
  const t: Tracked = { proc, group: o.group ?? false, testId: currentTest };
  if (proc.exitCode !== null || proc.signalCode !== null) return proc;
  live.add(t);
  proc.once("exit", () => live.delete(t));
  return proc;
}

/** The test now running (beforeEach) or none (afterEach): processes started meanwhile belong to it. */
export function setCurrentTest(id: string | undefined): void {
  currentTest = id;
}

function killNow(t: Tracked): void {
  try {
    if (t.group && t.proc.pid !== undefined) process.kill(-t.proc.pid, "SIGKILL");
    else t.proc.kill("SIGKILL");
  } catch {
    // already gone
  }
}

/** SIGKILLs the tracked processes `which` selects and waits until each exited (5 s at most each). */
export async function killTracked(which: (testId: string | undefined) => boolean = () => true): Promise<number> {
  const doomed = [...live].filter((t) => which(t.testId));
  await Promise.all(
    doomed.map(
      (t) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 5000);
          t.proc.once("exit", () => {
            clearTimeout(timer);
            resolve();
          });
          killNow(t);
        }),
    ),
  );
  return doomed.length;
}

/** Synchronous, for process 'exit' and signals: no waiting possible there. */
export function killAllNow(): void {
  for (const t of live) killNow(t);
  live.clear();
}

/** How many tracked processes are alive (the registry's own test). */
export function trackedCount(): number {
  return live.size;
}
