// Sentinel's +switch-master, heard on up to MAX_WATCHED sentinels for as long as the store runs: where
// the master went. A node (redis-node.ts) leaves its master at the switch and, for a while after it,
// connects to no other server. The sentinels learn of a failover one by one (hello messages, every 2 s),
// so the first lookup after the switch may ask one that still names the old master, which stays a
// master until Sentinel reconfigures it about 10 s later: hits counted there would be lost.
import net from "node:net";
import { Redis, type RedisOptions } from "ioredis";
import type { Logger } from "pino";
import { failureWords } from "./failure-words.js";

/** Sentinels subscribed to at most (the configured ones first, then those they name). */
export const MAX_WATCHED = 5;

/** How long after a switch no other server is taken for the master: the sentinels agree well within it. */
export const SWITCH_SETTLE_MS = 5000;

export interface Endpoint {
  host: string;
  port: number;
}

/** The new master in a +switch-master message ("NAME old-ip old-port new-ip new-port") for `name`. */
export function parseSwitch(message: string, name: string): Endpoint | undefined {
  const parts = message.split(" ");
  if (parts.length !== 5 || parts[0] !== name) return undefined;
  return endpointOf(parts[3], parts[4]);
}

/** host and port as a sentinel reports them; undefined when either is not one. */
function endpointOf(host: string | undefined, port: string | undefined): Endpoint | undefined {
  const n = Number(port);
  return host && Number.isInteger(n) && n > 0 && n <= 65535 ? { host, port: n } : undefined;
}

/**
 * Whether a connection's peer is the announced master. A sentinel that announces hostnames
 * (announce-hostnames) names no address to compare, so then the port alone decides.
 */
export function isEndpoint(host: string | undefined, port: number | undefined, to: Endpoint): boolean {
  if (!host || port !== to.port) return false;
  if (net.isIP(to.host) === 0) return true;
  return normalizeIp(host) === normalizeIp(to.host);
}

function normalizeIp(ip: string): string {
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return (v4 ? v4[1] : ip).toLowerCase();
}

interface SwitchWatchOptions {
  name: string;
  sentinels: Endpoint[];
  username?: string;
  password?: string;
  connectTimeoutMs: number;
  retryStrategy: (times: number) => number;
  logger: Logger;
  /** Told of every switch of this master, from each sentinel that announces it. */
  onSwitch: (to: Endpoint) => void;
}

export class SwitchWatch {
  private readonly clients = new Map<string, Redis>();
  private readonly o: SwitchWatchOptions;
  private closed = false;

  constructor(o: SwitchWatchOptions) {
    this.o = o;
    for (const s of o.sentinels) this.watch(s);
  }

  close(): void {
    this.closed = true;
    for (const c of this.clients.values()) c.disconnect();
    this.clients.clear();
  }

  /** A connection to one sentinel, with its credentials and the connect bound. */
  private connect(s: Endpoint, more: RedisOptions): Redis {
    return new Redis({
      host: s.host,
      port: s.port,
      ...(this.o.username ? { username: this.o.username } : {}),
      ...(this.o.password !== undefined ? { password: this.o.password } : {}),
      connectTimeout: this.o.connectTimeoutMs,
      ...more,
    });
  }

  private watch(s: Endpoint): void {
    const id = `${s.host}:${s.port}`;
    if (this.closed || this.clients.has(id) || this.clients.size >= MAX_WATCHED) return;
    const client = this.connect(s, {
      retryStrategy: this.o.retryStrategy,
      maxRetriesPerRequest: null, // the subscription is made again on every reconnect
    });
    this.clients.set(id, client);
    // Without an 'error' listener ioredis errors would crash the process; the node reports the store's state.
    client.on("error", (err: Error) => this.o.logger.debug({ sentinel: id, reason: failureWords(err).reason, detail: err.message }, "sentinel watch"));
    client.on("message", (channel: string, message: string) => {
      const to = channel === "+switch-master" ? parseSwitch(message, this.o.name) : undefined;
      if (to) this.o.onSwitch(to);
    });
    client.subscribe("+switch-master").catch(() => {}); // made again on reconnect (autoResubscribe)
    if (this.clients.size < MAX_WATCHED) void this.discover(s);
  }

  /** The other sentinels of this master, as one sentinel knows them (asked on a short-lived connection). */
  private async discover(s: Endpoint): Promise<void> {
    const asker = this.connect(s, { commandTimeout: this.o.connectTimeoutMs, retryStrategy: () => null, maxRetriesPerRequest: 0, lazyConnect: true });
    asker.on("error", () => {});
    try {
      await asker.connect();
      const known = (await asker.call("SENTINEL", "SENTINELS", this.o.name)) as string[][];
      for (const fields of known) {
        const info = new Map<string, string>();
        for (let i = 0; i + 1 < fields.length; i += 2) info.set(fields[i], fields[i + 1]);
        const sentinel = endpointOf(info.get("ip"), info.get("port"));
        if (sentinel) this.watch(sentinel);
      }
    } catch {
      // Not reachable now: the configured sentinels are watched anyway.
    } finally {
      asker.disconnect();
    }
  }
}
