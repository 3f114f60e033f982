// Whether the Redis user may run what sluice sends (redis-commands.ts), asked at every connect: one EVAL
// of redis.acl_check_cmd (Redis 7+) per command, which judges a call without running it, so nothing is
// written and the user needs no ACL rights of its own (ACL DRYRUN would need +acl|dryrun).
import { ReplyError, type Cluster, type Redis } from "ioredis";
import type { Logger } from "pino";
import { withDeadline } from "./deadline.js";
import { failureWords } from "./failure-words.js";
import type { Permissions } from "./store.js";
import { aclGrants, REDIS_COMMANDS, type RedisCommand, type RedisNeed } from "./redis-commands.js";

/** Which commands a node needs besides the connection's and the counters'. */
export interface PermissionNeeds {
  /** The --key-prefix: the sample key is under it, as sluice's are. */
  keyPrefix: string;
  /** Refusal summaries are kept (/top): their commands are needed. */
  summaries: boolean;
  /** A Redis Cluster node: CLUSTER NODES and ASKING are needed. */
  cluster?: boolean;
}

export interface PermissionCheck {
  permissions: Permissions;
  /** FCALL and FUNCTION LOAD allowed (undefined: not known): without them scripts go by EVALSHA. */
  functions: boolean | undefined;
}

/** Stands for the sample key in the commands' words (the script gets it as ARGV[1]). */
const KEY = "\u0000key";

/**
 * Judges each command of the list, its words written into the script (so the call carries no command names
 * of its own), and returns the positions of those refused.
 */
const CHECK_LUA = (() => {
  const word = (w: string) => (w === KEY ? "k" : `'${w.replace(/[\\']/g, "\\$&")}'`);
  const rows = REDIS_COMMANDS.map((c) => `{ ${[...c.name.split("|"), ...c.sample(KEY)].map(word).join(", ")} }`);
  return [
    "if not redis.acl_check_cmd then return redis.error_reply('ERR sluice: no redis.acl_check_cmd') end",
    "local k = ARGV[1]",
    `local C = { ${rows.join(", ")} }`,
    "local refused = {}",
    "for i = 1, #C do if not redis.acl_check_cmd(unpack(C[i])) then refused[#refused + 1] = i end end",
    "return refused",
  ].join("\n");
})();

export async function checkPermissions(client: Redis | Cluster, user: string, needs: PermissionNeeds): Promise<PermissionCheck> {
  const key = `${needs.keyPrefix}sluice:{sluice-acl}:check`;
  let refusedAt: number[];
  try {
    refusedAt = ((await client.call("EVAL", CHECK_LUA, "0", key)) as unknown[]).map(Number);
  } catch (err) {
    if (!(err instanceof ReplyError)) throw err;
    const message = (err as Error).message;
    if (/^NOPERM/.test(message) && /'eval'/.test(message)) {
      return {
        permissions: { state: "missing", missing: ["eval"], fix: fixLine(user, ["eval"]), reason: "without EVAL the other commands cannot be checked" },
        functions: undefined,
      };
    }
    if (/no redis\.acl_check_cmd/.test(message)) {
      return {
        permissions: { state: "unchecked", reason: "this Redis cannot judge a command without running it (Redis 7 and later can)" },
        functions: undefined,
      };
    }
    return { permissions: { state: "unchecked", reason: `the check failed: ${message}` }, functions: undefined };
  }
  const refused = new Set(refusedAt.map((i) => REDIS_COMMANDS[i - 1]?.name));
  const functions = !REDIS_COMMANDS.some((c) => c.need === "functions" && refused.has(c.name));
  const needed = new Set<RedisNeed>(["connection", "counters", functions ? "functions" : "evalsha"]);
  if (needs.summaries) needed.add("summaries");
  if (needs.cluster) needed.add("cluster");
  const missing = REDIS_COMMANDS.filter((c: RedisCommand) => needed.has(c.need) && refused.has(c.name)).map((c) => c.name);
  if (missing.length === 0) return { permissions: { state: "ok" }, functions };
  return { permissions: { state: "missing", missing, fix: fixLine(user, missing) }, functions };
}

function fixLine(user: string, missing: readonly string[]): string {
  return `ACL SETUSER ${user} ${aclGrants(missing)}`;
}

/** An ACL refusal the last check did not foresee asks again, at most this often. */
const RECHECK_MS = 5000;

/**
 * One node's permissions: checked at each connect and when a refusal was not foreseen, kept for /readyz, and
 * logged when the finding changes (a reconnect that finds the same logs nothing).
 */
export class NodePermissions {
  /** The last check's finding; undefined until one finished. */
  found: Permissions | undefined;
  private logged: string | undefined;
  private recheckAt = -Infinity;

  constructor(
    private readonly logger: Logger,
    private readonly node: string,
    private readonly needs: PermissionNeeds,
  ) {}

  /** The commands found refused, if any. */
  get missing(): readonly string[] | undefined {
    return this.found?.state === "missing" ? this.found.missing : undefined;
  }

  /** Checks (bounded by timeoutMs) and logs; resolves with whether the function library may be used (undefined: not known). */
  async check(client: Redis, timeoutMs: number): Promise<boolean | undefined> {
    const user = client.options.username || "default";
    try {
      const r = await withDeadline(checkPermissions(client, user, this.needs), timeoutMs);
      this.found = r.permissions;
      this.log(user);
      return r.functions;
    } catch (err) {
      // Not answered (the connection went meanwhile): the next connect asks again.
      this.logger.debug({ store: this.node, reason: failureWords(err).reason }, "Redis permission check not answered");
      return undefined;
    }
  }

  /** An ACL refusal of `command` ("unknown": not named) the last check did not foresee, and none asked lately. */
  recheckFor(command: string): boolean {
    const missing = this.missing;
    if (missing && (command === "unknown" || missing.includes(command))) return false;
    const now = performance.now();
    if (now - this.recheckAt < RECHECK_MS) return false;
    this.recheckAt = now;
    return true;
  }

  private log(user: string): void {
    const p = this.found!;
    const said = JSON.stringify(p);
    if (said === this.logged) return;
    const first = this.logged === undefined;
    this.logged = said;
    if (p.state === "missing") {
      this.logger.error(
        { store: this.node, user, missing: p.missing, fix: p.fix, ...(p.reason ? { reason: p.reason } : {}) },
        "the Redis user may not run commands sluice needs: calls that need them are answered by their failure_mode",
      );
    } else if (p.state === "unchecked") {
      this.logger.info({ store: this.node, user, reason: p.reason }, "Redis permissions not checked");
    } else if (!first) {
      this.logger.info({ store: this.node, user }, "the Redis user may run every command sluice needs");
    }
  }
}
