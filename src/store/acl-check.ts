// Whether the Redis user may run what sluice sends (redis-commands.ts), asked at every connect: one EVAL
// of redis.acl_check_cmd (Redis 7+) per command, which judges a call without running it, so nothing is
// written and the user needs no ACL rights of its own (ACL DRYRUN would need +acl|dryrun).
import { ReplyError, type Cluster, type Redis } from "ioredis";
import { aclGrants, REDIS_COMMANDS, type RedisCommand, type RedisCommandName, type RedisNeed } from "./redis-commands.js";

/** Which commands a node needs besides the connection's and the counters'. */
export interface PermissionNeeds {
  /** The --key-prefix: the sample key is under it, as sluice's are. */
  keyPrefix: string;
  /** Refusal summaries are kept (/top): their commands are needed. */
  summaries: boolean;
  /** A Redis Cluster node: CLUSTER NODES and ASKING are needed. */
  cluster?: boolean;
}

/** What a node's user may not do, for /readyz and the log. */
export interface Permissions {
  /** ok: every needed command is allowed; missing: some are not; unchecked: the server cannot tell (why in reason). */
  state: "ok" | "missing" | "unchecked";
  missing?: RedisCommandName[];
  /** missing: the ACL command that grants them. */
  fix?: string;
  reason?: string;
}

export interface PermissionCheck {
  permissions: Permissions;
  /** FCALL and FUNCTION LOAD allowed (undefined: not known): without them scripts go by EVALSHA. */
  functions: boolean | undefined;
}

// Judges each command of ARGV (a count, then the command's words) and returns the positions of those refused.
const CHECK_LUA = `
if not redis.acl_check_cmd then return redis.error_reply('ERR sluice: no redis.acl_check_cmd') end
local refused, i, n = {}, 1, 0
while i <= #ARGV do
  n = n + 1
  local words = tonumber(ARGV[i])
  if not redis.acl_check_cmd(unpack(ARGV, i + 1, i + words)) then refused[#refused + 1] = n end
  i = i + words + 1
end
return refused
`;

export async function checkPermissions(client: Redis | Cluster, user: string, needs: PermissionNeeds): Promise<PermissionCheck> {
  const key = `${needs.keyPrefix}sluice:{sluice-acl}:check`;
  const args: string[] = [];
  for (const c of REDIS_COMMANDS) {
    const words = [...c.name.split("|"), ...c.sample(key)];
    args.push(String(words.length), ...words);
  }
  let refusedAt: number[];
  try {
    refusedAt = ((await client.call("EVAL", CHECK_LUA, "0", ...args)) as unknown[]).map(Number);
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
