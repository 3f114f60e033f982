// Every Redis command sluice sends, the one list: docs/operating.md's least-privilege ACL line is this list
// (test/unit/redis-acl-docs.test.ts holds the page to aclSetUserLine()), the permission check at each
// connect tests it (acl-check.ts), and the store contract runs under a user made from it.

/** Why sluice sends a command: each need is checked only where it applies. */
export type RedisNeed =
  | "connection" // every connection: ioredis's ready check, the breaker's probe
  | "functions" // Redis 7+: the function library (without them, EVALSHA; not a failure)
  | "evalsha" // scripts when the function library is not used
  | "counters" // inside the rate-limit, refund and lease scripts (lua/)
  | "summaries" // /top, /ui and `sluice top`: refusal summaries (store/summaries-redis.ts)
  | "cluster"; // Redis Cluster only: the slot map and ASK redirections

export interface RedisCommand {
  /** As ACL names it: `get`, or `function|load` for a subcommand. */
  readonly name: RedisCommandName;
  readonly need: RedisNeed;
  /**
   * The words after the command in a call the permission check tests (never sent: redis.acl_check_cmd
   * only judges it), for a key `k` sluice would write.
   */
  readonly sample: (k: string) => readonly string[];
}

const NAMES = [
  "info",
  "ping",
  "eval",
  "fcall",
  "function|load",
  "evalsha",
  "script|load",
  "time",
  "get",
  "set",
  "incrby",
  "decrby",
  "del",
  "pexpireat",
  "pexpiretime",
  "pfadd",
  "zincrby",
  "zremrangebyrank",
  "expire",
  "pfcount",
  "zunion",
  "cluster|nodes",
  "asking",
] as const;
export type RedisCommandName = (typeof NAMES)[number];

/** In the order the ACL line lists them. */
export const REDIS_COMMANDS: readonly RedisCommand[] = [
  { name: "info", need: "connection", sample: () => ["server"] }, // ioredis's ready check; the server's version
  { name: "ping", need: "connection", sample: () => [] }, // the breaker's probe of a failing node
  // The summaries' writes and this permission check are EVAL; in EVALSHA mode a script the node lost is sent with it.
  { name: "eval", need: "connection", sample: (k) => ["return 0", "1", k] },
  { name: "fcall", need: "functions", sample: (k) => ["sluice", "1", k] },
  { name: "function|load", need: "functions", sample: () => ["#!lua name=sluice"] },
  { name: "evalsha", need: "evalsha", sample: (k) => ["0000000000000000000000000000000000000000", "1", k] },
  { name: "script|load", need: "evalsha", sample: () => ["return 0"] },
  { name: "time", need: "counters", sample: () => [] },
  { name: "get", need: "counters", sample: (k) => [k] },
  { name: "set", need: "counters", sample: (k) => [k, "1", "PXAT", "1"] },
  { name: "incrby", need: "counters", sample: (k) => [k, "1"] },
  { name: "decrby", need: "counters", sample: (k) => [k, "1"] },
  { name: "del", need: "counters", sample: (k) => [k] },
  { name: "pexpireat", need: "counters", sample: (k) => [k, "1"] },
  { name: "pexpiretime", need: "counters", sample: (k) => [k] },
  { name: "pfadd", need: "summaries", sample: (k) => [k, "m"] },
  { name: "zincrby", need: "summaries", sample: (k) => [k, "1", "m"] },
  { name: "zremrangebyrank", need: "summaries", sample: (k) => [k, "0", "-1"] },
  { name: "expire", need: "summaries", sample: (k) => [k, "1"] },
  { name: "pfcount", need: "summaries", sample: (k) => [k] },
  { name: "zunion", need: "summaries", sample: (k) => ["1", k, "WITHSCORES"] },
  { name: "cluster|nodes", need: "cluster", sample: () => [] },
  { name: "asking", need: "cluster", sample: () => [] },
];

/** A command's name as this list spells it, or undefined when sluice never sends it. */
export function knownCommand(name: string): RedisCommandName | undefined {
  const n = name.toLowerCase();
  return (NAMES as readonly string[]).includes(n) ? (n as RedisCommandName) : undefined;
}

/** `+get +set ...` for these commands. */
export function aclGrants(commands: readonly RedisCommand[] | readonly string[]): string {
  return commands.map((c) => `+${typeof c === "string" ? c : c.name}`).join(" ");
}

/** The key pattern a user needs for sluice's keys under this --key-prefix (core/keys.ts keyScanPattern's). */
export function aclKeyPattern(keyPrefix = ""): string {
  return `~${keyPrefix}sluice:*`;
}

/**
 * The least-privilege user, as docs/operating.md prints it: sluice's keys and every command but the
 * cluster's (`clusterGrants()` adds those).
 */
export function aclSetUserLine(user = "sluice", keyPrefix = ""): string {
  const commands = REDIS_COMMANDS.filter((c) => c.need !== "cluster");
  return `ACL SETUSER ${user} on >PASSWORD resetkeys ${aclKeyPattern(keyPrefix)} -@all ${aclGrants(commands)}`;
}

/** What a Redis Cluster user needs besides aclSetUserLine()'s. */
export function clusterGrants(): string {
  return aclGrants(REDIS_COMMANDS.filter((c) => c.need === "cluster"));
}
