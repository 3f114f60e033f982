// Redis store over one server or several independent ones (sharding): a key's shard is chosen by
// rendezvous hashing of its hash tag, so all keys of one descriptor live on one server. A server may be a
// Sentinel-monitored master (redis-sentinel.ts): the node follows it across failovers.
import type { Logger } from "pino";
import type { RedisOptions } from "ioredis";
import { DEFAULT_BREAKER_THRESHOLD, DEFAULT_PROBE_INTERVAL_MS } from "./breaker.js";
import type { Clock } from "./clock.js";
import { Rendezvous } from "./hash.js";
import { RedisNode } from "./redis-node.js";
import type { PermissionNeeds } from "./acl-check.js";
import type { StoreCallObserver } from "./guarded-call.js";
import type { ScriptErrorObserver } from "./script-errors.js";
import type { Check, CheckResult, Store, StoreStatus, LeaseEntry, LeaseReply } from "./store.js";
import type { SummaryRead, SummaryValue, SummaryWrite } from "./summaries.js";
import { readSummaries, usableOnly, writeSummaries } from "./summaries-redis.js";

interface RedisStoreOptions {
  /** One connection per server, in the order given (sentinel options: the master they name). */
  servers: RedisOptions[];
  timeoutMs: number;
  logger: Logger;
  breakerThreshold?: number;
  probeIntervalMs?: number;
  clock?: Clock;
  /** Told of every script call that reached a node's connection (metrics). */
  onCall?: StoreCallObserver;
  /** Told of every error reply, by kind (metrics). */
  onScriptError?: ScriptErrorObserver;
  /** What each node's permission check at connect asks for (acl-check.ts). */
  permissionNeeds?: PermissionNeeds;
}

export class RedisStore implements Store {
  readonly name: string;
  private readonly nodes: RedisNode[];
  private readonly ring: Rendezvous | undefined;
  private readonly kind: string;

  constructor(o: RedisStoreOptions) {
    if (o.servers.length === 0) throw new Error("RedisStore needs at least one server");
    this.nodes = o.servers.map(
      (connection) =>
        new RedisNode({
          connection,
          timeoutMs: o.timeoutMs,
          logger: o.logger,
          breakerThreshold: o.breakerThreshold ?? DEFAULT_BREAKER_THRESHOLD,
          probeIntervalMs: o.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS,
          clock: o.clock,
          onCall: o.onCall,
          onScriptError: o.onScriptError,
          permissionNeeds: o.permissionNeeds,
        }),
    );
    const sentinel = o.servers.every((s) => s.sentinels);
    this.kind = this.nodes.length > 1 ? "redis-shards" : sentinel ? "redis-sentinel" : "redis";
    this.name = this.nodes.length > 1 ? `redis (${this.nodes.length} shards)` : sentinel ? `redis-sentinel (${o.servers[0].name})` : "redis";
    if (this.nodes.length > 1) this.ring = new Rendezvous(this.nodes.map((n) => n.id));
  }

  status(): StoreStatus {
    return { kind: this.kind, nodes: this.nodes.map((n) => n.status()) };
  }

  groupOf(hashTag: string): number {
    return this.ring ? this.ring.pick(hashTag) : 0;
  }

  apply(group: number, checks: Check[], dryRun = false): Promise<CheckResult[]> {
    return this.nodes[group].apply(checks, dryRun);
  }

  refund(group: number, checks: Check[], results: CheckResult[]): Promise<void> {
    return this.nodes[group].refund(checks, results);
  }

  lease(group: number, entries: readonly LeaseEntry[]): Promise<LeaseReply> {
    return this.nodes[group].lease(entries);
  }

  writeSummaries(group: number, writes: readonly SummaryWrite[]): Promise<void> {
    return writeSummaries(usableOnly(this.nodes[group]), writes);
  }

  readSummaries(group: number, reads: readonly SummaryRead[]): Promise<SummaryValue[]> {
    return readSummaries(usableOnly(this.nodes[group]), reads);
  }

  async start(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.start()));
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.close()));
  }
}
