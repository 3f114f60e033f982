// Redis Sentinel: which master to follow and where its sentinels are, in sluice's form
// (MASTER@host:port[,host:port...]) or the reference's (MASTERNAME,host:port[,host:port...]), and the
// ioredis options naming them. The connection itself is a RedisNode (redis-node.ts): it bounds lookups
// and reconnects, and follows the master the sentinels name after a failover.
import type { RedisOptions } from "ioredis";
import { parseHostPort } from "../core/host-port.js";
import { readPassword, RedisOptionsError, type RedisAuth } from "./redis-options.js";

export interface SentinelSpec {
  /** The master's name as the sentinels monitor it (`sentinel monitor NAME ...`). */
  name: string;
  /** Sentinels to ask, in order; ioredis adds the others they know of. */
  sentinels: { host: string; port: number }[];
}

/** A name Sentinel's config can hold: one token, printable, no separator of either form. */
const MASTER_NAME = /^[!-+\--?A-~]{1,256}$/; // printable ASCII except space, ',' and '@'

/** sluice's form: MASTER@host:port[,host:port...]. `what` names the setting in errors. */
export function parseSentinelSpec(raw: string, what = "--redis-sentinel"): SentinelSpec {
  const form = "MASTER@host:port[,host:port...]";
  const at = raw.indexOf("@");
  if (at < 0) throw new RedisOptionsError(`${what} takes ${form}, got '${raw}': no '@' after the master's name`);
  return spec(raw.slice(0, at).trim(), raw.slice(at + 1).split(","), what, form);
}

/** The reference's REDIS_URL with REDIS_TYPE=sentinel: MASTERNAME,host:port[,host:port...]. */
export function parseReferenceSentinelUrl(raw: string, what = "REDIS_URL"): SentinelSpec {
  const [name, ...hosts] = raw.split(",");
  return spec(name.trim(), hosts, what, "MASTERNAME,host:port[,host:port...]");
}

function spec(name: string, hosts: string[], what: string, form: string): SentinelSpec {
  if (!MASTER_NAME.test(name)) throw new RedisOptionsError(`${what} takes ${form}: the master's name '${name}' is empty or holds a space, ',' or '@'`);
  const sentinels: SentinelSpec["sentinels"] = [];
  const seen = new Set<string>();
  for (const part of hosts.map((h) => h.trim())) {
    const addr = parseHostPort(part);
    if (!addr) throw new RedisOptionsError(`${what} takes ${form}: '${part}' is not a sentinel's host:port`);
    const { host, port } = addr;
    if (seen.has(`${host}:${port}`)) throw new RedisOptionsError(`${what} lists the sentinel ${part} twice`);
    seen.add(`${host}:${port}`);
    sentinels.push({ host, port });
  }
  if (sentinels.length === 0) throw new RedisOptionsError(`${what} takes ${form}: no sentinel given`);
  return { name, sentinels };
}

/**
 * ioredis options for the master the sentinels name: `auth` for the master (as for --redis), `sentinelAuth`
 * for the sentinels. Bounds (timeouts, retries) are the node's business (redis-node.ts).
 */
export function sentinelConnectionOptions(spec: SentinelSpec, auth: RedisAuth = {}, sentinelAuth: RedisAuth = {}): RedisOptions {
  const out: RedisOptions = { sentinels: spec.sentinels.map((s) => ({ ...s })), name: spec.name };
  if (auth.username) out.username = auth.username;
  const password = readPassword(auth);
  if (password !== undefined) out.password = password;
  if (sentinelAuth.username) out.sentinelUsername = sentinelAuth.username;
  const sentinelPassword = readPassword(sentinelAuth, "Redis Sentinel password file");
  if (sentinelPassword !== undefined) out.sentinelPassword = sentinelPassword;
  return out;
}
