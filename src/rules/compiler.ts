// Rule loads that cost the event loop only what changed, in steps of bounded cost. A child process reads,
// parses and validates (compile-job.ts, incremental against the rules in force); this side builds each
// changed domain from its chunks, one chunk per event-loop turn, then swaps in a new RuleSet that shares
// every unchanged domain with the old one. A request is decided by one RuleSet, old or new, never a mix.
import { existsSync } from "node:fs";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { deserialize } from "node:v8";
import { type ChildProcess, fork } from "node:child_process";
import { runJob, type FileState, type JobEntry, type JobInput, type JobOutput, type Packed } from "./compile-job.js";
import { CompileDeadline, processCpuMs } from "./compile-deadline.js";
import { LOWEST_PRIORITY_ARG, type CompileAnswer, type CompileRequest } from "./compile-process.js";
import { DomainBuilder, type NodeRecord } from "./flat.js";
import type { CompileStats, LoadOptions, LoadResult } from "./load.js";
import type { DomainRules, RuleSet } from "./model.js";

/** A load's outcome: apply it with commit() once the owner accepts it (the rules are then in force). */
export interface Compiled {
  result: LoadResult;
  stats: CompileStats;
  commit(): void;
}

/** How often a compile in flight is checked against its deadline (compile-deadline.ts). */
const DEADLINE_CHECK_MS = 1000;

/**
 * The compile process's heap: bounded, so that a rule set too large for it fails as a load error (the rules in
 * force keep serving) instead of taking sluice. The YAML parse of a single file of 100,000 descriptors needs
 * more than 256 MiB; the process ends after each load, and all it used is given back.
 */
const CHILD_NODE_FLAGS = ["--max-old-space-size=1536", "--max-semi-space-size=16"];

interface CompilerOptions<S> {
  load: LoadOptions;
  /** The compile process's entry (a built .js file); absent or missing (tests from sources): the job runs inline. */
  workerUrl?: URL;
  /** The entries of a source, for the inline job (the compile process computes its own). */
  entriesOf(source: S): { entries: JobEntry[]; warnings: string[] };
  /**
   * What of the source the compile process needs against the files in force (e.g. no bytes of an unchanged
   * xDS resource), so that a reload sends only what changed; `needsWhole`: the job's error said it needed
   * what was left out, and it runs again with the whole source.
   */
  slim?: { of(source: S, prev: ReadonlyMap<string, FileState>): S; needsWhole(err: Error): boolean };
  /** Work on each changed domain before it serves (the shown paths of secret values), one step per event-loop turn. */
  prepare?: DomainPrep;
}

/** Work on a built domain in steps, each short (about a millisecond): the compile runs one per event-loop turn. */
export type DomainPrep = (domain: DomainRules) => Iterable<unknown>;

export class RuleCompiler<S> {
  private readonly o: CompilerOptions<S>;
  private readonly threaded: boolean;
  /** The compile process of the load in progress. */
  private thread: CompileThread<S> | undefined;
  private files: [string, FileState][] = [];
  private lastDigest = "";
  private inForce: RuleSet = { domains: new Map() };

  constructor(o: CompilerOptions<S>) {
    this.o = o;
    this.threaded = o.workerUrl !== undefined && existsSync(fileURLToPath(o.workerUrl));
  }

  /**
   * Compiles what the source holds now; undefined when it is the same as at the last call. `starting`:
   * nothing is served yet, so a first load may be split over two processes.
   */
  async compile(source: S, starting = false): Promise<Compiled | undefined> {
    const started = performance.now();
    const clock = new StepClock();
    const input: JobInput = { load: this.o.load, prev: this.files, lastDigest: this.lastDigest };
    const out: JobOutput = this.threaded
      ? await this.inThread(input, source, starting, clock)
      : await clock.step(() => Promise.resolve<JobOutput>(inline(input, this.o.entriesOf(source))));
    if (out.unchanged) return undefined;
    this.lastDigest = out.digest;
    const stats = (): CompileStats => ({
      durationMs: performance.now() - started,
      mainThreadMs: clock.total,
      longestStepMs: clock.longest,
      parsed: out.parsed,
    });
    if (out.errors.length > 0) {
      const s = stats();
      const errorCount = out.errorCount === undefined ? {} : { errorCount: out.errorCount };
      return { result: { errors: out.errors, ...errorCount, warnings: out.warnings, stats: s }, stats: s, commit: () => undefined };
    }
    const built: DomainRules[] = [];
    const transferred = new Set<ArrayBuffer>();
    for (const d of out.domains) {
      const b = new DomainBuilder(d.files, d);
      const chunks: (Packed | undefined)[] = d.chunks;
      for (let i = 0; i < chunks.length; i++) {
        await turn();
        const chunk = chunks[i]!;
        chunks[i] = undefined; // built: its bytes can go
        clock.measure(() => {
          if (!(chunk instanceof Uint8Array)) return b.add(chunk);
          b.add(deserialize(chunk) as NodeRecord[]);
          transferred.add(chunk.buffer as ArrayBuffer);
        });
      }
      const domain = b.done();
      const steps = this.o.prepare?.(domain)[Symbol.iterator]();
      while (steps) {
        await turn();
        if (clock.measure(() => steps.next()).done) break;
      }
      built.push(domain);
    }
    // Detached, the chunks' bytes are freed now rather than at some later full collection.
    for (const ab of transferred) (ab as ArrayBuffer & { transfer(length: number): ArrayBuffer }).transfer(0);
    await turn();
    const rules = clock.measure(() => this.swap(out, built));
    const files = out.files;
    const s = stats();
    return {
      result: { rules, errors: [], warnings: out.warnings, stats: s },
      stats: s,
      commit: () => {
        this.files = files;
        this.inForce = rules;
      },
    };
  }

  /** The new set: the changed domains built, every other one shared, in the order of their files. */
  private swap(out: JobOutput, built: DomainRules[]): RuleSet {
    const changed = new Map(built.map((d) => [d.domain, d]));
    const domains = new Map<string, DomainRules>();
    for (const [, st] of out.files) {
      if (domains.has(st.domain)) continue;
      const d = changed.get(st.domain) ?? this.inForce.domains.get(st.domain);
      if (d) domains.set(st.domain, d);
    }
    return { domains, digest: out.digest };
  }

  /** Ends the compile process (sluice stops). */
  close(): void {
    this.thread?.close();
    this.thread = undefined;
  }

  /**
   * A process per load, ended after it: what it grew to while parsing is given back instead of staying
   * resident in sluice (it starts on another core; the event loop only forks it). Forking (node waits for
   * the child's exec: 5-15 ms), slimming the source and sending it are steps of their own, each in its own
   * event-loop turn.
   */
  private async inThread(input: JobInput, source: S, starting: boolean, clock: StepClock): Promise<JobOutput> {
    // While sluice serves, the compile yields the CPU to it; the first load, before serving, does not.
    const thread = new CompileThread<S>(this.o.workerUrl!, !starting);
    this.thread = thread;
    try {
      clock.measure(() => thread.start());
      await turn();
      return await this.runIn(thread, input, source, starting, clock);
    } finally {
      thread.close();
      this.thread = undefined;
    }
  }

  private async runIn(thread: CompileThread<S>, input: JobInput, source: S, starting: boolean, clock: StepClock): Promise<JobOutput> {
    if (!starting || input.prev.length > 0 || availableParallelism() < 2) return this.runSlim(thread, input, source, clock);
    // The first load, before serving: half the files in a second process. A domain in both halves (merged
    // or duplicate) or any error: the whole load again in one process, which sees every file together.
    const extra = new CompileThread<S>(this.o.workerUrl!, false);
    try {
      const [a, b] = await Promise.all([thread.run({ input: { ...input, part: [0, 2] }, source }), extra.run({ input: { ...input, part: [1, 2] }, source })]);
      const names = new Set(a.files.map(([, f]) => f.domain));
      const apart = b.files.every(([, f]) => !names.has(f.domain));
      if (a.unchanged || a.errors.length > 0 || b.errors.length > 0 || !apart) return thread.run({ input, source });
      return { ...a, files: [...a.files, ...b.files], domains: [...a.domains, ...b.domains], parsed: a.parsed + b.parsed };
    } finally {
      extra.close();
    }
  }

  private async runSlim(thread: CompileThread<S>, input: JobInput, source: S, clock: StepClock): Promise<JobOutput> {
    const slim = this.o.slim;
    if (!slim || input.prev.length === 0) return clock.step(() => thread.run({ input, source }));
    const slimmed = clock.measure(() => slim.of(source, new Map(input.prev)));
    await turn();
    try {
      return await clock.step(() => thread.run({ input, source: slimmed }));
    } catch (err) {
      if (!slim.needsWhole(err as Error)) throw err;
      return clock.step(() => thread.run({ input, source }));
    }
  }
}

/** One compile process: jobs in turn, each with a deadline on its CPU (compile-deadline.ts); a process that fails fails its jobs. */
class CompileThread<S> {
  private worker: ChildProcess | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(o: JobOutput): void; reject(e: Error): void; timer: NodeJS.Timeout }>();

  /** yieldCpu: the process runs at the lowest CPU priority (compile-process.ts). */
  constructor(
    private readonly url: URL,
    private readonly yieldCpu: boolean,
  ) {}

  run(req: CompileRequest<S>): Promise<JobOutput> {
    const w = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const pid = w.pid;
      const cpuNow = () => (pid === undefined ? undefined : processCpuMs(pid));
      const deadline = new CompileDeadline(cpuNow(), Date.now());
      const timer = setInterval(() => {
        const why = deadline.over(cpuNow(), Date.now());
        if (why) this.fail(new Error(`rule compile ${why}`));
      }, DEADLINE_CHECK_MS);
      this.pending.set(id, { resolve, reject, timer });
      w.send({ ...req, id });
    });
  }

  close(): void {
    const w = this.worker;
    this.worker = undefined;
    w?.kill();
  }

  /** Forks the process now (run() does if it was not). */
  start(): ChildProcess {
    // Typed arrays and the chunks' one buffer travel as they are with the structured-clone serialization.
    const w = fork(fileURLToPath(this.url), this.yieldCpu ? [LOWEST_PRIORITY_ARG] : [], {
      execArgv: CHILD_NODE_FLAGS,
      serialization: "advanced",
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    // Never what keeps sluice running.
    w.unref();
    w.channel?.unref();
    w.on("message", (m: CompileAnswer) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      clearInterval(p.timer);
      if ("error" in m) p.reject(new Error(m.error));
      else p.resolve(m.out);
    });
    w.on("error", (err) => this.worker === w && this.fail(err));
    w.on("exit", (code, signal) => this.worker === w && this.fail(new Error(`rule compile process exited (${signal ?? `code ${code}`})`)));
    this.worker = w;
    return w;
  }

  /** Every job in flight fails; the next one starts a new thread. */
  private fail(err: Error): void {
    this.worker?.kill();
    this.worker = undefined;
    for (const p of this.pending.values()) {
      clearInterval(p.timer);
      p.reject(err);
    }
    this.pending.clear();
  }
}

function inline(input: JobInput, src: { entries: JobEntry[]; warnings: string[] }): JobOutput {
  return runJob(input, src.entries, src.warnings);
}

/** Lets the event loop serve what waits (I/O, timers) between two steps. */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Adds up the event-loop time of a load's steps. */
class StepClock {
  total = 0;
  longest = 0;

  /** The main thread's CPU time in a step (GC pauses in it included): a busy host's preemption is not the load's cost. */
  measure<T>(fn: () => T): T {
    const t = process.threadCpuUsage();
    try {
      return fn();
    } finally {
      const d = process.threadCpuUsage(t);
      this.add((d.user + d.system) / 1000);
    }
  }

  /** The synchronous part of an async step (posting to the thread, or the inline job). */
  step<T>(fn: () => Promise<T>): Promise<T> {
    return this.measure(fn);
  }

  private add(ms: number): void {
    this.total += ms;
    if (ms > this.longest) this.longest = ms;
  }
}

/** A load that failed outside the rules (the thread died, ran out of memory): an error of the source. */
export function compileFailure(origin: string, err: unknown): LoadResult {
  return { errors: [{ file: origin, line: 0, path: "", message: `rules could not be compiled: ${(err as Error).message}` }], warnings: [] };
}
