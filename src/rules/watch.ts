// Hot reload: watches the rule directory and has it compiled again when its rule files change (rules/compiler.ts:
// off the event loop, only the changed domains). Decides nothing: it hands each new load result (rules or
// errors) to its owner.
import { readdirSync, statSync, watch, type FSWatcher } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { compileFailure, RuleCompiler, type DomainPrep } from "./compiler.js";
import { dirEntries } from "./compile-job.js";
import { errorTotal, type LoadOptions, type LoadResult } from "./load.js";
import { shortRuleError, type RuleSet } from "./model.js";

interface RuleWatcherOptions {
  dir: string;
  load: LoadOptions;
  /** Full re-read as a fallback to events (events can be missed, e.g. an edited symlink target); 0 = off. */
  intervalMs: number;
  /** Events arriving within this window are one change (an editor's or a ConfigMap swap's burst). */
  debounceMs?: number;
  logger: Logger;
  /** A rule of the owner's applied to every read, the first and each reload (e.g. rules/empty-dir.ts). */
  vet?: (result: LoadResult) => LoadResult;
  /** Called once per changed content: with rules when it is valid, with errors when it is not. */
  onLoad(result: LoadResult): void;
  /** Compile in a child process (the default); false: in this thread (tests). */
  threaded?: boolean;
  /** Work on each changed domain before it serves, in event-loop steps (compiler.ts). */
  prepare?: DomainPrep;
}

export interface ReloadState {
  /** fs.watch is active; false = re-reading every second until it is back. */
  watching: boolean;
  /** Successful reloads since start (the first load not counted). */
  reloads: number;
  lastReloadAt?: string;
  /** Errors of the files as they are now when they were rejected (the last good rules still serve); 0 otherwise. */
  errors: number;
  /** The first of them (at most READY_ERRORS, each cut to a bounded length), as `sluice check` prints them. */
  firstErrors?: string[];
  lastErrorAt?: string;
  /** The last compile failed (the process died or timed out): it is tried again then, changed files or not. */
  retryAt?: string;
}

/** Errors /readyz shows at most (`sluice check` lists every one). */
const READY_ERRORS = 50;
/** A failed compile is tried again after this, doubling up to RETRY_MAX_MS, until it succeeds or the files change. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 60_000;

const DEFAULT_DEBOUNCE_MS = 150;
/** While the directory cannot be watched (gone, fs.watch failing), re-read it this often. */
const RECOVERY_MS = 1000;

const COMPILE_WORKER = new URL("./compile-main.js", import.meta.url);

export class RuleWatcher {
  private readonly o: RuleWatcherOptions;
  private readonly compiler: RuleCompiler<string>;
  /** Names, sizes and times of the rule files at the last compile: an equal signature needs none. */
  private signature = "";
  /** A check is running; another asked meanwhile runs after it. */
  private running: Promise<void> | undefined;
  private again = false;
  private watcher: FSWatcher | undefined;
  /** dev:ino of the watched directory: a replaced directory needs a new watch. */
  private watchedId = "";
  private debounce: NodeJS.Timeout | undefined;
  private periodic: NodeJS.Timeout | undefined;
  private recovery: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly s: ReloadState = { watching: false, reloads: 0, errors: 0 };
  /** Failed compiles in a row since the files last changed, and the timer of the next try. */
  private failures = 0;
  private retry: NodeJS.Timeout | undefined;
  /** The retry timer fired: the next check compiles even with the same files. */
  private retryDue = false;

  constructor(o: RuleWatcherOptions) {
    this.o = o;
    this.compiler = new RuleCompiler<string>({
      load: o.load,
      workerUrl: o.threaded === false ? undefined : COMPILE_WORKER,
      entriesOf: dirEntries,
      prepare: o.prepare,
    });
  }

  /** The first load, before start(): records what was read so that start() sees only later changes. */
  async load(): Promise<LoadResult> {
    this.signature = statSignature(this.o.dir);
    return (await this.read(true))?.result ?? { errors: [], warnings: [] };
  }

  /**
   * The directory compiled against the rules in force; undefined when it is the same as at the last read.
   * `failed`: the compile itself failed (its process died, timed out or threw), not the rules.
   */
  private async read(starting = false): Promise<{ result: LoadResult; failed: boolean } | undefined> {
    let result: LoadResult;
    let commit = () => {};
    let failed = false;
    try {
      const c = await this.compiler.compile(this.o.dir, starting);
      if (!c) return undefined;
      result = c.result;
      commit = c.commit;
    } catch (err) {
      result = compileFailure(this.o.dir, err);
      failed = true;
    }
    if (this.o.vet) result = this.o.vet(result);
    if (result.rules) commit();
    return { result, failed };
  }

  /** Begins watching; checks once at once, catching a change made between load() and now. */
  start(): void {
    if (this.o.intervalMs > 0) {
      this.periodic = setInterval(() => void this.check(), this.o.intervalMs);
      this.periodic.unref();
    }
    void this.check();
  }

  state(): ReloadState {
    return { ...this.s };
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.debounce);
    clearTimeout(this.retry);
    clearInterval(this.periodic);
    clearInterval(this.recovery);
    this.unwatch();
    this.compiler.close();
  }

  /** Re-reads the directory when its rule files differ from the last read; never throws. Resolves when done. */
  check(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.checkOnce().finally(() => {
      this.running = undefined;
      if (this.again) {
        this.again = false;
        void this.check();
      }
    });
    return this.running;
  }

  private async checkOnce(): Promise<void> {
    if (this.closed) return;
    try {
      this.ensureWatching();
      // Cheap on the event loop: names and stat of the files; the compile process compares their texts.
      const signature = statSignature(this.o.dir);
      if (signature === this.signature && !this.retryDue) return;
      // Changed files start the backoff again; so does a compile that succeeds.
      if (signature !== this.signature) this.failures = 0;
      this.signature = signature;
      this.retryDue = false;
      clearTimeout(this.retry);
      this.retry = undefined;
      const read = await this.read();
      if (!read || this.closed) return;
      const { result, failed } = read;
      const at = new Date().toISOString();
      if (result.rules) {
        this.s.reloads++;
        this.s.lastReloadAt = at;
        this.s.errors = 0;
        delete this.s.firstErrors;
      } else {
        this.s.errors = errorTotal(result);
        this.s.firstErrors = result.errors.slice(0, READY_ERRORS).map(shortRuleError);
        this.s.lastErrorAt = at;
      }
      delete this.s.retryAt;
      this.o.onLoad(result);
      if (failed) this.retryLater();
      else this.failures = 0;
    } catch (err) {
      this.o.logger.error({ err, dir: this.o.dir }, "rule reload check failed");
    }
  }

  /** A compile that failed (not the rules: its process) is tried again, with backoff, whether or not the files change. */
  private retryLater(): void {
    if (this.closed) return;
    const ms = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** this.failures);
    this.failures++;
    this.s.retryAt = new Date(Date.now() + ms).toISOString();
    this.o.logger.warn({ dir: this.o.dir, retryInMs: ms, failures: this.failures }, "rule compile failed; trying again");
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.retryDue = true;
      void this.check();
    }, ms);
    this.retry.unref();
  }

  private schedule(): void {
    // Not restarted by later events: a steady stream of events still gets checked every debounce window.
    if (this.debounce || this.closed) return;
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      void this.check();
    }, this.o.debounceMs ?? DEFAULT_DEBOUNCE_MS);
    this.debounce.unref();
  }

  /** (Re)creates the directory watch when it is missing or watches a directory no longer at the path. */
  private ensureWatching(): void {
    let id: string;
    try {
      const st = statSync(this.o.dir);
      id = `${st.dev}:${st.ino}`;
    } catch (err) {
      this.lost(`rule directory unavailable: ${(err as Error).message}`);
      return;
    }
    if (this.watcher && id === this.watchedId) return;
    this.unwatch();
    try {
      // Any event in the directory may be a change: ConfigMaps swap a dot-named `..data` link, which
      // loadRuleDir skips but which every rule file points through. The stat signature and the digest filter no-ops.
      const w = watch(this.o.dir, { persistent: false }, () => this.schedule());
      w.on("error", (err) => {
        if (this.watcher === w) this.lost(`watch failed: ${err.message}`);
      });
      this.watcher = w;
      this.watchedId = id;
    } catch (err) {
      this.lost(`watch failed: ${(err as Error).message}`);
      return;
    }
    if (!this.s.watching && this.recovery) this.o.logger.info({ dir: this.o.dir }, "watching the rule directory again");
    this.s.watching = true;
    clearInterval(this.recovery);
    this.recovery = undefined;
  }

  /** Falls back to re-reading every RECOVERY_MS until a watch works again; logs once per loss. */
  private lost(reason: string): void {
    this.unwatch();
    if (this.recovery || this.closed) return;
    this.s.watching = false;
    this.o.logger.warn({ dir: this.o.dir, reason }, `rule directory not watched; re-reading it every ${RECOVERY_MS / 1000} s until it is`);
    this.recovery = setInterval(() => void this.check(), RECOVERY_MS);
    this.recovery.unref();
  }

  private unwatch(): void {
    const w = this.watcher;
    this.watcher = undefined;
    this.watchedId = "";
    w?.close();
  }
}

/**
 * Names, sizes, inodes and modification times of the rule files, selected as loadRuleDir selects them
 * (top-level, not dot-named, *.yaml/*.yml, symlinks followed): stat calls only, no file read. A change
 * here sends the directory to the compile process, which compares the texts (an equal text is no change).
 * Unreadable parts enter as their error code, so a directory that stays broken is reported once.
 */
export function statSignature(dir: string): string {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (err) {
    return `unreadable:${(err as NodeJS.ErrnoException).code ?? "?"}`;
  }
  let out = "";
  for (const name of names) {
    if (name.startsWith(".") || !/\.ya?ml$/.test(name)) continue;
    try {
      const st = statSync(join(dir, name));
      if (!st.isFile()) continue;
      out += `${name}\0${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}\0`;
    } catch (err) {
      out += `${name}\0error:${(err as NodeJS.ErrnoException).code ?? "?"}\0`;
    }
  }
  return out;
}

/** Rule counts per domain, for logs and /readyz. */
export function ruleCounts(rules: RuleSet): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, d] of rules.domains) out[name] = d.ruleCount;
  return out;
}
