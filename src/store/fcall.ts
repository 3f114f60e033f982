// One script call through ioredis, as lean as the client allows: a Command handed to the connection (no
// defineCommand wrapper with its extra promises and per-call closures). Two modes, chosen per node at
// connect: Redis 7+ holds sluice's function library (FUNCTION LOAD once) and is called with FCALL; an
// older Redis gets EVALSHA. A node that lost what it held (restart, FLUSHALL / FUNCTION FLUSH, a failover
// to a replica that never had it) answers "Function not found" or NOSCRIPT: the library is loaded again
// and the call repeated (it did not run), or the call is sent as EVAL. Neither fails the call.
import { Command, ReplyError, type Cluster, type Redis } from "ioredis";
import { allScripts, type ScriptArgs, storeLibrary, type StoreScript } from "./lua-library.js";

/** How a node's scripts are called: FCALL of the function library (Redis 7+), or EVALSHA. */
export type ScriptMode = "function" | "evalsha";

/** args: numkeys, KEYS, ARGV in one array (lua-library.ts: scriptArgs); ioredis flattens it. */
export async function callScript(client: Redis | Cluster, mode: ScriptMode, script: StoreScript, args: ScriptArgs, buffers = false): Promise<unknown> {
  // buffers: bulk replies as Buffers (binary values, e.g. a token bucket's doubles).
  const opts = buffers ? { replyEncoding: null } : undefined;
  if (mode === "function") {
    try {
      return await client.sendCommand(new Command("fcall", [script.fn, args], opts));
    } catch (err) {
      if (!(err instanceof ReplyError) || !(err as Error).message.includes("Function not found")) throw err;
      await reloadLibrary(client);
      return client.sendCommand(new Command("fcall", [script.fn, args], opts));
    }
  }
  try {
    return await client.sendCommand(new Command("evalsha", [script.sha, args], opts));
  } catch (err) {
    if (!(err instanceof ReplyError) || !(err as Error).message.startsWith("NOSCRIPT")) throw err;
    return client.sendCommand(new Command("eval", [script.lua, args], opts));
  }
}

/**
 * Loads what a node needs and says how to call it: the library where Redis has functions (7+) and FUNCTION
 * is allowed, else the scripts (SCRIPT LOAD) for EVALSHA. `functions`: whether the user may run FCALL and
 * FUNCTION LOAD, as the permission check found (undefined: not known, FUNCTION LOAD tells).
 */
export async function loadScripts(client: Redis, functions?: boolean): Promise<ScriptMode> {
  if (functions !== false && (await hasFunctions(client))) {
    try {
      await loadLibrary(client);
      return "function";
    } catch (err) {
      // An ACL that allows EVALSHA but not FUNCTION: scripts still work.
      if (!(err instanceof ReplyError) || !/NOPERM|unknown command/i.test((err as Error).message)) throw err;
    }
  }
  for (const s of allScripts()) await client.script("LOAD", s.lua);
  return "evalsha";
}

async function hasFunctions(client: Redis): Promise<boolean> {
  let info: string;
  try {
    info = await client.info("server");
  } catch (err) {
    // A user without INFO (the permission check names it): FUNCTION LOAD itself tells whether there are functions.
    if (err instanceof ReplyError && /^NOPERM/.test((err as Error).message)) return true;
    throw err;
  }
  const major = Number(/^redis_version:(\d+)/m.exec(info)?.[1] ?? 0);
  return major >= 7;
}

/**
 * FUNCTION LOAD of the library; one already there (another instance of this version loaded it) is fine, and
 * so is a replica's READONLY: it gets the library from its master by replication (and, promoted without it,
 * on its first call).
 */
async function loadLibrary(client: Redis): Promise<void> {
  const lib = storeLibrary();
  try {
    await client.call("FUNCTION", "LOAD", lib.code);
  } catch (err) {
    if (!(err instanceof ReplyError) || !/already exists|^READONLY/.test((err as Error).message)) throw err;
  }
}

/** Loads in flight per client: the calls that all found the library missing wait for one load. */
const reloading = new WeakMap<Redis | Cluster, Promise<void>>();

function reloadLibrary(client: Redis | Cluster): Promise<void> {
  let p = reloading.get(client);
  if (!p) {
    // A cluster: every master (the one that answered may be any of them; a load is cheap where it exists).
    const nodes = client.isCluster ? (client as Cluster).nodes("master") : [client as Redis];
    p = Promise.all(nodes.map(loadLibrary)).then(() => undefined);
    reloading.set(client, p);
    const done = () => reloading.delete(client);
    p.then(done, done);
  }
  return p;
}
