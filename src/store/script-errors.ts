// Error replies of a node's scripts and commands (NOPERM, OOM, BUSY ...), by kind: the command and Redis's
// error code. Every one is counted (the observer: a metric); the log gets one line per kind, then at most one
// a minute with how many it left out. A refusal the permission check already named (acl-check.ts) is not
// logged again: its line said it once, with the ACL command that fixes it.
import type { Logger } from "pino";
import { replyKind, replyWords } from "./failure-words.js";
import { knownCommand } from "./redis-commands.js";

export interface ScriptErrorKind {
  /** Redis's error code: NOPERM (any ACL refusal), OOM, BUSY, ERR ... */
  code: string;
  /** The command refused, as redis-commands.ts names it; "unknown" when neither the reply nor the check tells. */
  command: string;
}

/** Told of every error reply (metrics): the node and its kind. */
export type ScriptErrorObserver = (node: string, kind: ScriptErrorKind) => void;

/** A kind is logged again at most this often. */
const LOG_EVERY_MS = 60_000;
/** Kinds remembered per node (codes and commands are few; this only bounds a Redis that invents codes). */
const MAX_KINDS = 64;

export class ScriptErrorLog {
  private readonly last = new Map<string, { at: number; left: number }>();

  constructor(
    private readonly logger: Logger,
    private readonly node: string,
    private readonly onError: ScriptErrorObserver | undefined,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * An error reply to `what` (the rate-limit script, CLUSTER NODES ...). `missing`: the commands the permission
   * check found refused (an ACL refusal that names no command is theirs when there is one); `outcome`: what
   * sluice did instead. Returns the kind.
   */
  report(what: string, message: string, missing: readonly string[] | undefined, outcome: string): ScriptErrorKind {
    const k = replyKind(message);
    let command = k.command !== undefined ? knownCommand(k.command) : undefined;
    if (command === undefined && k.code === "NOPERM" && missing?.length === 1) command = knownCommand(missing[0]);
    const code = /^[A-Z]{2,20}$/.test(k.code) ? k.code : "ERR";
    const kind: ScriptErrorKind = { code, command: command ?? "unknown" };
    this.onError?.(this.node, kind);
    // Said already, with its fix, by the permission check's line.
    if (code === "NOPERM" && missing && missing.length > 0 && (command === undefined || missing.includes(command))) return kind;
    const id = `${code} ${kind.command}`;
    const now = this.now();
    const seen = this.last.get(id);
    if (seen && now - seen.at < LOG_EVERY_MS) {
      seen.left++;
      return kind;
    }
    if (!seen && this.last.size >= MAX_KINDS) this.last.clear();
    this.last.set(id, { at: now, left: 0 });
    this.logger.warn(
      {
        store: this.node,
        call: what,
        command: kind.command,
        code,
        reason: command && code === "NOPERM" ? `the Redis user may not run ${command}` : replyWords(message),
        outcome,
        ...(seen && seen.left > 0 ? { alsoSince: seen.left } : {}),
        detail: message,
      },
      "Redis refused a command sluice sent",
    );
    return kind;
  }
}
