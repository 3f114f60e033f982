// Summaries on Redis: a batch of writes is one EVAL (PFADD / ZINCRBY + trim, EXPIRE each key; every key
// in KEYS, so it runs on a Cluster too); reads are PFCOUNT and ZUNION over a window's keys, sent together.
import type { SummaryRead, SummaryValue, SummaryWrite } from "./summaries.js";
import { topCounts } from "./summaries.js";
import { StoreUnavailableError } from "./store.js";

/** One command to the node a group maps to (RedisNode.command). */
export type NodeCommand = (args: string[]) => Promise<unknown>;

/** Summaries are not on any call's path: a slow store gets this long. */
const SUMMARY_TIMEOUT_MS = 2000;

/**
 * Commands to a node only while it is usable (connected, circuit closed): a node that is down or being
 * failed over is left to the limiter's calls and its breaker; summaries are dropped meanwhile.
 */
export function usableOnly(node: { usable: boolean; id: string; command(args: string[], timeoutMs: number, outcome?: string): Promise<unknown> }): NodeCommand {
  return (args) =>
    node.usable
      ? node.command(args, SUMMARY_TIMEOUT_MS, "refusal summaries (/top) were not written or read")
      : Promise.reject(new StoreUnavailableError(`Redis ${node.id} is unreachable (not connected)`, undefined, NOT_CONNECTED));
}

const NOT_CONNECTED = { reason: "not connected", detail: "", unreachable: true };

// ARGV per key: kind, ttl, keep, n, then n members (d) or n member/count pairs (c). unpack() is
// bounded by Lua's stack, so members go in chunks. A script is not a transaction: a command refused midway
// (an ACL without it) keeps what ran before it, so each is a pcall, and a refusal leaves the key it was
// writing with its TTL (EXPIRE), or deletes it where EXPIRE is the one refused; the reply names the command.
const WRITE_SCRIPT = `
local function refused(key, ttl, cmd, e)
  if redis.pcall('EXPIRE', key, ttl) ~= 1 then redis.pcall('DEL', key) end
  local msg = e.err or tostring(e)
  if string.sub(msg, 1, 6) == 'NOPERM' or string.find(msg, "can't run this command", 1, true) then msg = 'NOPERM ' .. cmd .. ': ' .. msg end
  return redis.error_reply(msg)
end
local function failed(r)
  return type(r) == 'table' and r.err ~= nil
end
local a = 1
for _, key in ipairs(KEYS) do
  local kind, ttl, keep, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  a = a + 4
  if kind == 'd' then
    for j = 0, n - 1, 500 do
      local r = redis.pcall('PFADD', key, unpack(ARGV, a + j, a + math.min(j + 500, n) - 1))
      if failed(r) then return refused(key, ttl, 'pfadd', r) end
    end
    a = a + n
  else
    for j = 0, n - 1 do
      local r = redis.pcall('ZINCRBY', key, ARGV[a + 2 * j + 1], ARGV[a + 2 * j])
      if failed(r) then return refused(key, ttl, 'zincrby', r) end
    end
    a = a + 2 * n
    local r = redis.pcall('ZREMRANGEBYRANK', key, 0, -keep - 1)
    if failed(r) then return refused(key, ttl, 'zremrangebyrank', r) end
  end
  local r = redis.pcall('EXPIRE', key, ttl)
  if failed(r) then return refused(key, ttl, 'expire', r) end
end
return 0
`;

export async function writeSummaries(command: NodeCommand, writes: readonly SummaryWrite[]): Promise<void> {
  const live = writes.filter((w) => w.members.length > 0);
  if (live.length === 0) return;
  const args: string[] = [];
  for (const w of live) {
    if (w.kind === "distinct") {
      args.push("d", String(w.ttlSeconds), "0", String(w.members.length), ...w.members);
    } else {
      args.push("c", String(w.ttlSeconds), String(w.keep), String(w.members.length));
      for (let i = 0; i < w.members.length; i++) args.push(w.members[i], String(w.counts[i]));
    }
  }
  await command(["EVAL", WRITE_SCRIPT, String(live.length), ...live.map((w) => w.key), ...args]);
}

export function readSummaries(command: NodeCommand, reads: readonly SummaryRead[]): Promise<SummaryValue[]> {
  return Promise.all(
    reads.map(async (r): Promise<SummaryValue> => {
      if (r.keys.length === 0) return r.kind === "distinct" ? 0 : [];
      if (r.kind === "distinct") return Number(await command(["PFCOUNT", ...r.keys]));
      const reply = (await command(["ZUNION", String(r.keys.length), ...r.keys, "WITHSCORES"])) as unknown[];
      // [member, score] pairs (ioredis 6), or the flat list of RESP2.
      const pairs: [string, number][] = [];
      if (reply.length > 0 && Array.isArray(reply[0])) for (const p of reply as unknown[][]) pairs.push([String(p[0]), Number(p[1])]);
      else for (let i = 0; i + 1 < reply.length; i += 2) pairs.push([String(reply[i]), Number(reply[i + 1])]);
      return topCounts(pairs, r.n);
    }),
  );
}
