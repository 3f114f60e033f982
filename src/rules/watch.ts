// Hot reload: watches the rule directory and re-reads it in full when its rule files change.
// Decides nothing: it hands each new load result (rules or errors) to its owner.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync, watch, type FSWatcher } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { loadRuleDir, type LoadOptions, type LoadResult } from "./load.js";
import type { RuleSet } from "./model.js";

export interface RuleWatcherOptions {
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
}

export interface ReloadState {
  /** fs.watch is active; false = re-reading every second until it is back. */
  watching: boolean;
  /** Successful reloads since start (the first load not counted). */
  reloads: number;
  lastReloadAt?: string;
  /** Errors of the files as they are now when they were rejected (the last good rules still serve); 0 otherwise. */
  errors: number;
  lastErrorAt?: string;
}

const DEFAULT_DEBOUNCE_MS = 150;
/** While the directory cannot be watched (gone, fs.watch failing), re-read it this often. */
const RECOVERY_MS = 1000;

export class RuleWatcher {
  private readonly o: RuleWatcherOptions;
  private fingerprint = "";
  private watcher: FSWatcher | undefined;
  /** dev:ino of the watched directory: a replaced directory needs a new watch. */
  private watchedId = "";
  private debounce: NodeJS.Timeout | undefined;
  private periodic: NodeJS.Timeout | undefined;
  private recovery: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly s: ReloadState = { watching: false, reloads: 0, errors: 0 };

  constructor(o: RuleWatcherOptions) {
    this.o = o;
  }

  /** The first load, before start(): records what was read so that start() sees only later changes. */
  load(): LoadResult {
    this.fingerprint = fingerprintRuleDir(this.o.dir);
    return this.read();
  }

  private read(): LoadResult {
    const result = loadRuleDir(this.o.dir, this.o.load);
    return this.o.vet ? this.o.vet(result) : result;
  }

  /** Begins watching; checks once at once, catching a change made between load() and now. */
  start(): void {
    if (this.o.intervalMs > 0) {
      this.periodic = setInterval(() => this.check(), this.o.intervalMs);
      this.periodic.unref();
    }
    this.check();
  }

  state(): ReloadState {
    return { ...this.s };
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.debounce);
    clearInterval(this.periodic);
    clearInterval(this.recovery);
    this.unwatch();
  }

  /** Re-reads the directory when its rule files differ from the last read; never throws. */
  check(): void {
    if (this.closed) return;
    try {
      this.ensureWatching();
      const now = fingerprintRuleDir(this.o.dir);
      if (now === this.fingerprint) return;
      this.fingerprint = now;
      const result = this.read();
      const at = new Date().toISOString();
      if (result.rules) {
        this.s.reloads++;
        this.s.lastReloadAt = at;
        this.s.errors = 0;
      } else {
        this.s.errors = result.errors.length;
        this.s.lastErrorAt = at;
      }
      this.o.onLoad(result);
    } catch (err) {
      this.o.logger.error({ err, dir: this.o.dir }, "rule reload check failed");
    }
  }

  private schedule(): void {
    // Not restarted by later events: a steady stream of events still gets checked every debounce window.
    if (this.debounce || this.closed) return;
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      this.check();
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
      // loadRuleDir skips but which every rule file points through. The fingerprint filters no-ops.
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
    this.recovery = setInterval(() => this.check(), RECOVERY_MS);
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
 * A hash of the rule files' names and texts, selected as loadRuleDir selects them (top-level, not
 * dot-named, *.yaml/*.yml, symlinks followed). Unreadable parts enter as their error code, so a
 * directory that stays broken is one unchanged fingerprint and is reported once.
 */
export function fingerprintRuleDir(dir: string): string {
  const h = createHash("sha256");
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (err) {
    return `unreadable:${(err as NodeJS.ErrnoException).code ?? "?"}`;
  }
  for (const name of names) {
    if (name.startsWith(".") || !/\.ya?ml$/.test(name)) continue;
    const file = join(dir, name);
    let text: string;
    try {
      if (!statSync(file).isFile()) continue;
      text = readFileSync(file, "utf8");
    } catch (err) {
      text = `\0error:${(err as NodeJS.ErrnoException).code ?? "?"}`;
    }
    h.update(`${name}\0${Buffer.byteLength(text)}\0`).update(text);
  }
  return h.digest("hex");
}

/** Rule counts per domain, for logs and /readyz. */
export function ruleCounts(rules: RuleSet): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, d] of rules.domains) out[name] = d.ruleCount;
  return out;
}
