// Where the rules come from: the rule directory (watched) or a control plane (xDS). cli/serve-build.ts talks to this
// shape only; each source validates through rules/load.ts and hands every result to onLoad.
import type { Logger } from "pino";
import type { DomainPrep } from "./compiler.js";
import type { LoadOptions, LoadResult } from "./load.js";
import { refuseEmptyRuleDir } from "./empty-dir.js";
import { RuleWatcher, type ReloadState } from "./watch.js";

export interface RuleSource {
  /** Names the source in log lines: { dir } or { xds }. */
  readonly origin: Record<string, string>;
  /**
   * The rules to start with. The directory: what it holds now. xDS: the first valid set the control plane
   * sends (waits for it), or at once with no rules when `forceStart` is set.
   */
  first(forceStart: boolean): Promise<LoadResult>;
  /** Later changes go to onLoad from now on. */
  start(): void;
  /** For /readyz: how the source is doing. */
  state(): object;
  close(): void;
}

export interface RuleSourceOptions {
  load: LoadOptions;
  logger: Logger;
  /** Called once per change after start(): with rules when valid, with errors when not. */
  onLoad(result: LoadResult): void;
  /** Work on each changed domain before it serves, in event-loop steps (compiler.ts). */
  prepare?: DomainPrep;
}

/** An empty or missing directory: allowed, or refused with this hint (rules/empty-dir.ts). */
interface EmptyDirPolicy {
  allow: boolean;
  hint?: string;
}

/** The rule directory, watched and re-read (rules/watch.ts). */
export class DirectorySource implements RuleSource {
  readonly origin: Record<string, string>;
  private readonly watcher: RuleWatcher;

  constructor(dir: string, intervalMs: number, o: RuleSourceOptions, empty: EmptyDirPolicy) {
    this.origin = { dir };
    // Checked at start and on every reload: a directory emptied by mistake keeps the last good rules serving.
    const vet = (r: LoadResult) => refuseEmptyRuleDir(dir, r, empty.allow, empty.hint);
    this.watcher = new RuleWatcher({ dir, load: o.load, intervalMs, logger: o.logger, vet, prepare: o.prepare, onLoad: (r) => o.onLoad(r) });
  }

  first(): Promise<LoadResult> {
    return this.watcher.load();
  }

  start(): void {
    this.watcher.start();
  }

  state(): ReloadState {
    return this.watcher.state();
  }

  close(): void {
    this.watcher.close();
  }
}
