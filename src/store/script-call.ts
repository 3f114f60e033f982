// One script call through ioredis, as lean as the client allows: an EVALSHA Command handed to the
// connection (no defineCommand wrapper with its extra promises and per-call closures). A server that lost the script (restart, failover, SCRIPT FLUSH) answers NOSCRIPT and gets
// the same call as EVAL, which also caches the script there for the next EVALSHA.
import { Command, ReplyError, type Cluster, type Redis } from "ioredis";
import type { StoreScript } from "./scripts.js";

/** args: numkeys, KEYS, ARGV in one array (scripts.ts: scriptArgs); ioredis flattens it. */
export async function evalScript(client: Redis | Cluster, script: StoreScript, args: (string | number)[], buffers = false): Promise<unknown> {
  // buffers: bulk replies as Buffers (binary values, e.g. a token bucket's doubles).
  const opts = buffers ? { replyEncoding: null } : undefined;
  try {
    return await client.sendCommand(new Command("evalsha", [script.sha, args], opts));
  } catch (err) {
    if (!(err instanceof ReplyError) || !(err as Error).message.startsWith("NOSCRIPT")) throw err;
    return client.sendCommand(new Command("eval", [script.lua, args], opts));
  }
}
