// Redis Cluster through ioredis's Cluster client (MOVED/ASK handled there). A group is a hash slot:
// every key of one descriptor shares its hash tag, so a group's checks run in one script on one node.
// Each master has its own circuit breaker, so one failing master only affects the slots it serves.
import { Cluster, type ClusterNode, type RedisOptions } from "ioredis";
import type { Logger } from "pino";
import { CircuitBreaker, DEFAULT_BREAKER_THRESHOLD, DEFAULT_PROBE_INTERVAL_MS } from "./breaker.js";
import { ReplyWatch, withDeadline } from "./deadline.js";
import { clusterSlot } from "./hash.js";
import { guardedCall, logBreakerChanges, type StoreCallObserver } from "./guarded-call.js";
import { evalScript } from "./script-call.js";
import { allScripts, applyScript, leaseArgs, leaseScript, parseApplyReply, parseLeaseReply, refundScript, scriptArgs, type StoreScript } from "./scripts.js";
import {
  StoreUnavailableError,
  type Check,
  type CheckResult,
  type NodeStatus,
  type Store,
  type StoreStatus,
  type LeaseEntry,
  type LeaseReply,
} from "./store.js";

export interface RedisClusterStoreOptions {
  startupNodes: ClusterNode[];
  /** Per-node connection options (password, tls ...), without host and port. */
  nodeOptions?: Omit<RedisOptions, "host" | "port">;
  timeoutMs: number;
  logger: Logger;
  breakerThreshold?: number;
  probeIntervalMs?: number;
  /** Told of every script call (metrics): the master that served it, its time, whether it answered. */
  onCall?: StoreCallObserver;
}

interface Master {
  breaker: CircuitBreaker;
  watch: ReplyWatch;
}

export class RedisClusterStore implements Store {
  readonly name = "redis-cluster";
  private readonly cluster: Cluster;
  private readonly logger: Logger;
  /** Per master, like its connection: its breaker and the deadline of its calls. */
  private readonly masters = new Map<string, Master>();
  private readonly threshold: number;
  private readonly onCall: RedisClusterStoreOptions["onCall"];
  private readonly probeIntervalMs: number;
  private readonly timeoutMs: number;
  private up: boolean | undefined;
  private closing = false;

  constructor(o: RedisClusterStoreOptions) {
    this.logger = o.logger;
    this.threshold = o.breakerThreshold ?? DEFAULT_BREAKER_THRESHOLD;
    this.onCall = o.onCall;
    this.probeIntervalMs = o.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS;
    this.timeoutMs = o.timeoutMs;
    this.cluster = new Cluster(o.startupNodes, {
      lazyConnect: true,
      // ioredis's cluster auto-pipelining routes a defined script by its first argument (numkeys), not
      // its key, and then refuses the batch ("same slots allocation group"). Without it, concurrent
      // calls are still written to each node's connection without waiting for each other.
      enableAutoPipelining: false,
      enableOfflineQueue: false, // a down cluster fails calls at once instead of queueing them
      scaleReads: "master",
      maxRedirections: 4,
      retryDelayOnFailover: 50,
      retryDelayOnClusterDown: 50,
      retryDelayOnTryAgain: 50,
      slotsRefreshTimeout: Math.max(1000, o.timeoutMs),
      clusterRetryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), 500),
      redisOptions: {
        ...o.nodeOptions,
        // No commandTimeout: script calls are bounded by each master's ReplyWatch instead (see deadline.ts).
        connectTimeout: Math.max(1000, o.timeoutMs),
        maxRetriesPerRequest: 0, // never resend a script after a disconnect: it may have run
      },
    });
    // The masters get the scripts once the cluster is ready, before any script call is queued on their
    // connections, so calls go as EVALSHA from the first; a node that joins or loses them later answers
    // NOSCRIPT and gets EVAL (script-call.ts).
    this.cluster.on("ready", () => {
      this.loadScripts();
      this.markUp();
    });
    // Without an 'error' listener ioredis errors would crash the process.
    this.cluster.on("error", (err: Error) => this.markDown(err.message));
    this.cluster.on("node error", (err: Error, node: string) => this.logger.debug({ store: node, reason: err.message }, "cluster node error"));
    this.cluster.on("close", () => this.markDown("connection closed"));
  }

  async start(): Promise<void> {
    try {
      await this.cluster.connect();
    } catch (err) {
      this.markDown((err as Error).message);
    }
  }

  status(): StoreStatus {
    const nodes: NodeStatus[] = [];
    const seen = new Set<string>();
    for (const owners of this.cluster.slots) {
      const id = owners?.[0];
      if (!id || seen.has(id)) continue;
      seen.add(id);
      const m = this.masters.get(id);
      nodes.push({ id, state: m?.breaker.isOpen ? "circuit_open" : this.up ? "up" : "down", inFlight: m?.watch.inFlight ?? 0 });
    }
    return { kind: "redis-cluster", nodes };
  }

  groupOf(hashTag: string): number {
    return clusterSlot(hashTag);
  }

  async apply(slot: number, checks: Check[], dryRun = false): Promise<CheckResult[]> {
    const reply = await this.call(slot, "rate-limit script", applyScript(), scriptArgs(checks, undefined, undefined, dryRun));
    try {
      return parseApplyReply(reply, checks);
    } catch (err) {
      throw new StoreUnavailableError(`redis cluster slot ${slot}: ${(err as Error).message}`);
    }
  }

  async refund(slot: number, checks: Check[], results: CheckResult[]): Promise<void> {
    await this.call(slot, "refund script", refundScript(), scriptArgs(checks, undefined, results));
  }

  async lease(slot: number, entries: readonly LeaseEntry[]): Promise<LeaseReply> {
    const reply = await this.call(slot, "lease script", leaseScript(), leaseArgs(entries, undefined));
    try {
      return parseLeaseReply(reply, entries);
    } catch (err) {
      throw new StoreUnavailableError(`redis cluster slot ${slot}: ${(err as Error).message}`);
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const m of this.masters.values()) {
      m.breaker.stop();
      m.watch.stop();
    }
    try {
      await this.cluster.quit();
    } catch {
      this.cluster.disconnect();
    }
  }

  /** One script call for one slot, guarded by the breaker of the master serving it (guarded-call.ts). */
  private call(slot: number, what: string, script: StoreScript, args: (string | number)[], buffers = false): Promise<unknown> {
    const owner = this.cluster.slots[slot]?.[0];
    if (!owner) return Promise.reject(new StoreUnavailableError(`redis cluster: no node serves slot ${slot}`));
    const m = this.master(owner);
    return guardedCall(owner, m.breaker, this.onCall, what, () => m.watch.watch(evalScript(this.cluster, script, args, buffers), true));
  }

  private master(node: string): Master {
    let m = this.masters.get(node);
    if (!m) {
      const breaker = new CircuitBreaker({
        threshold: this.threshold,
        probeIntervalMs: this.probeIntervalMs,
        probe: () => this.ping(node),
        onChange: logBreakerChanges(this.logger, node),
      });
      this.masters.set(node, (m = { breaker, watch: new ReplyWatch(this.timeoutMs) }));
    }
    return m;
  }

  private loadScripts(): void {
    for (const node of this.cluster.nodes("master")) {
      for (const s of allScripts()) {
        node.script("LOAD", s.lua).catch((err: Error) => this.logger.debug({ reason: err.message }, "cluster node script load failed"));
      }
    }
  }

  private async ping(node: string): Promise<void> {
    const redis = this.cluster.nodes("master").find((n) => `${n.options.host}:${n.options.port}` === node);
    if (!redis) throw new Error(`${node} is not a master any more`);
    await withDeadline(redis.ping(), this.timeoutMs);
  }

  private markUp(): void {
    if (this.up === true) return;
    this.up = true;
    this.logger.info({ store: "redis-cluster" }, "rate-limit store up");
  }

  private markDown(reason: string): void {
    if (this.up === false || this.closing) return;
    this.up = false;
    this.logger.warn({ store: "redis-cluster", reason }, "rate-limit store down");
  }
}
