// Redis Cluster: a connection per node (redis-node.ts: its breaker, its deadline, its batched writes) and
// the slot map (cluster-map.ts) that says which node serves each slot. A group is a hash slot: every key of
// one descriptor shares its hash tag, so a group's checks run in one script on one node.
//
// The topology is followed, always: a node that fails or goes silent makes sluice ask every reachable node
// for its view at once, and again every REFRESH_WHILE_DOWN_MS while a slot's node is not usable; a slot moves
// to its new master as soon as a view says so (the higher config epoch wins), so a breaker belongs to its
// node and a node that serves no slots holds no keys. MOVED moves a slot and retries there; ASK retries
// once behind ASKING; CLUSTERDOWN and TRYAGAIN are answered by policy (the cluster refused) and refresh.
import type { RedisOptions } from "ioredis";
import { ReplyError } from "ioredis";
import type { Logger } from "pino";
import { DEFAULT_BREAKER_THRESHOLD, DEFAULT_PROBE_INTERVAL_MS } from "./breaker.js";
import { parseClusterNodes, SlotMap } from "./cluster-map.js";
import { clusterSlot } from "./hash.js";
import type { PermissionNeeds } from "./acl-check.js";
import type { StoreCallObserver } from "./guarded-call.js";
import type { ScriptErrorObserver } from "./script-errors.js";
import { RedisNode } from "./redis-node.js";
import type { SummaryRead, SummaryValue, SummaryWrite } from "./summaries.js";
import { readSummaries, usableOnly, writeSummaries, type NodeCommand } from "./summaries-redis.js";
import {
  applyScript,
  leaseArgs,
  leaseScript,
  parseApplyReply,
  parseLeaseReply,
  refundScript,
  type ScriptArgs,
  scriptArgs,
  type StoreScript,
} from "./lua-library.js";
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

/** While a slot's node is down, open or silent: the views are asked again this often. */
const REFRESH_WHILE_DOWN_MS = 100;
/** With every node well: the views are asked this often anyway (nodes added, replicas moved). */
const REFRESH_IDLE_MS = 5000;
/** Refreshes started by events (a failed call, a redirection) are at least this far apart. */
const REFRESH_MIN_GAP_MS = 20;
/** After a node's trouble the views are asked at the fast pace this long, even if the node seems up. */
const TROUBLE_WINDOW_MS = 2000;
/** Redirections followed for one call (MOVED, then ASK during a migration). */
const MAX_REDIRECTIONS = 2;

/** The cluster's topology events (metrics). */
export interface ClusterEvents {
  topologyRefresh(ok: boolean): void;
  slotsMoved(n: number): void;
  /** From a node's first trouble to the first store-decided answer on the slots it served. */
  failoverSeconds(seconds: number): void;
}

interface RedisClusterStoreOptions {
  startupNodes: { host: string; port: number }[];
  /** Per-node connection options (password, tls ...), without host and port. */
  nodeOptions?: Omit<RedisOptions, "host" | "port">;
  timeoutMs: number;
  logger: Logger;
  breakerThreshold?: number;
  probeIntervalMs?: number;
  /** Told of every script call (metrics): the node that served it, its time, whether it answered. */
  onCall?: StoreCallObserver;
  /** Told of every error reply, by kind (metrics). */
  onScriptError?: ScriptErrorObserver;
  /** What each node's permission check at connect asks for (acl-check.ts); a cluster's commands are added. */
  permissionNeeds?: PermissionNeeds;
  events?: ClusterEvents;
}

export class RedisClusterStore implements Store {
  readonly name = "redis-cluster";
  private readonly o: RedisClusterStoreOptions;
  private readonly logger: Logger;
  /** Every node of the cluster (masters and replicas: a replica promoted is used at once), by host:port. */
  private readonly nodes = new Map<string, RedisNode>();
  private readonly map = new SlotMap();
  /**
   * Nodes that gave trouble while serving slots, until a store-decided answer on those slots: since when
   * (performance.now()), and whether the node was known down meanwhile.
   */
  private readonly failedAt = new Map<string, { at: number; down: boolean }>();
  private readonly askTimeoutMs: number;
  private refreshing = false;
  private lastRefreshAt = -Infinity;
  private troubleUntil = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private timerDueAt = Infinity;
  private mapped = false;
  /** The nodes serving slots in the map (updated when slots move). */
  private owners = new Set<string>();
  private started = false;
  private closing = false;

  constructor(o: RedisClusterStoreOptions) {
    this.o = o;
    this.logger = o.logger;
    // A view is small and quick; a node that takes longer is skipped for this refresh (the others answer).
    this.askTimeoutMs = Math.max(100, 2 * o.timeoutMs);
    for (const n of o.startupNodes) this.node(`${n.host.includes(":") ? `[${n.host}]` : n.host}:${n.port}`);
  }

  async start(): Promise<void> {
    this.started = true;
    await Promise.all([...this.nodes.values()].map((n) => n.start()));
    await this.refresh("start");
    if (!this.mapped) this.logger.warn({ store: "redis-cluster", reason: "no node gave the cluster's slot map" }, "rate-limit store down");
  }

  status(): StoreStatus {
    // No node has given a slot map yet: the nodes it was started with, as they are.
    if (!this.mapped) return { kind: "redis-cluster", nodes: [...this.nodes.values()].map((n) => n.status()) };
    const { perNode, unowned } = this.map.counts();
    const nodes: NodeStatus[] = [];
    const replicas: NodeStatus[] = [];
    for (const [id, node] of this.nodes) {
      const slots = perNode.get(id);
      const s = node.status();
      if (slots) nodes.push({ ...s, role: "master", slots });
      else if (this.map.roles.has(id)) {
        const r = this.map.roles.get(id)!;
        replicas.push({ ...s, role: r.master ? "master" : "replica", ...(r.replicaOf ? { replicaOf: r.replicaOf } : {}) });
      }
    }
    return { kind: "redis-cluster", nodes, ...(replicas.length ? { replicas } : {}), ...(unowned ? { unownedSlots: unowned } : {}) };
  }

  groupOf(hashTag: string): number {
    return clusterSlot(hashTag);
  }

  async apply(slot: number, checks: Check[], dryRun = false): Promise<CheckResult[]> {
    const reply = await this.call(slot, "rate-limit script", applyScript(), scriptArgs(checks, undefined, undefined, dryRun), true);
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

  writeSummaries(slot: number, writes: readonly SummaryWrite[]): Promise<void> {
    return writeSummaries(this.slotCommand(slot), writes);
  }

  readSummaries(slot: number, reads: readonly SummaryRead[]): Promise<SummaryValue[]> {
    return readSummaries(this.slotCommand(slot), reads);
  }

  /** Summaries go to the slot's owner in the map as it is (no redirection followed: the next batch finds the new owner). */
  private slotCommand(slot: number): NodeCommand {
    return (args) => {
      const owner = this.map.ownerOf(slot);
      if (owner === undefined) return Promise.reject(new StoreUnavailableError(`redis cluster: no node serves slot ${slot}`));
      return usableOnly(this.node(owner))(args);
    };
  }

  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.timer);
    await Promise.all([...this.nodes.values()].map((n) => n.close()));
  }

  /** One script call for one slot on the node serving it, following MOVED and ASK. */
  private async call(slot: number, what: string, script: StoreScript, args: ScriptArgs, buffers = false): Promise<unknown> {
    const owner = this.map.ownerOf(slot);
    if (owner === undefined) {
      this.refreshSoon("a slot without a node");
      throw new StoreUnavailableError(`redis cluster: no node serves slot ${slot}`);
    }
    let node = this.node(owner);
    let asking = false;
    for (let hop = 0; ; hop++) {
      try {
        const reply = await node.call(what, script, args, buffers, asking);
        if (this.failedAt.size > 0) this.answered(node.id);
        return reply;
      } catch (err) {
        const reply = err instanceof StoreUnavailableError && err.cause instanceof ReplyError ? (err.cause as Error).message : undefined;
        if (reply === undefined) throw err;
        const redirect = /^(MOVED|ASK) (\d+) (\S+)$/.exec(reply);
        if (redirect && hop < MAX_REDIRECTIONS) {
          // The script did not run there: send it where the node says.
          asking = redirect[1] === "ASK";
          if (!asking && this.map.moved(slot, redirect[3])) {
            this.owners.add(redirect[3]);
            this.o.events?.slotsMoved(1);
            this.refreshSoon("MOVED");
          }
          node = this.node(redirect[3]);
          continue;
        }
        if (redirect || /^(CLUSTERDOWN|TRYAGAIN)\b/.test(reply)) this.refreshSoon(reply.split(" ")[0]);
        throw err;
      }
    }
  }

  /** The connection to a node, made on first mention (a view or a redirection names it). */
  private node(addr: string): RedisNode {
    let n = this.nodes.get(addr);
    if (!n) {
      const i = addr.lastIndexOf(":");
      n = new RedisNode({
        connection: { ...this.o.nodeOptions, host: addr.slice(0, i).replace(/^\[(.*)\]$/, "$1"), port: Number(addr.slice(i + 1)) },
        timeoutMs: this.o.timeoutMs,
        logger: this.logger,
        breakerThreshold: this.o.breakerThreshold ?? DEFAULT_BREAKER_THRESHOLD,
        probeIntervalMs: this.o.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS,
        onCall: this.o.onCall,
        onScriptError: this.o.onScriptError,
        permissionNeeds: { keyPrefix: "", summaries: false, ...this.o.permissionNeeds, cluster: true },
        onTrouble: (node, reason, down) => this.trouble(node, reason, down),
        onUp: () => this.refreshSoon("a node is up"),
      });
      this.nodes.set(addr, n);
      if (this.started) void n.start();
    }
    return n;
  }

  /**
   * A node failed or went silent: if it serves slots, the clock of its failover starts (a failover once the
   * node is known down: a lone late reply is not one); look at the topology now.
   */
  private trouble(node: RedisNode, reason: string, down: boolean): void {
    if (this.closing) return;
    const now = performance.now();
    const f = this.failedAt.get(node.id);
    if (f) f.down ||= down;
    else if (this.servesSlots(node.id)) {
      this.failedAt.set(node.id, { at: now, down });
      this.logger.warn({ store: node.id, reason }, "cluster node trouble: refreshing the slot map");
    }
    this.troubleUntil = now + TROUBLE_WINDOW_MS;
    this.refreshSoon(reason);
  }

  private servesSlots(id: string): boolean {
    return this.owners.has(id);
  }

  /** A store-decided answer from `id`: the failovers it ends are over. */
  private answered(id: string): void {
    const f = this.failedAt.get(id);
    if (f === undefined) return;
    this.failedAt.delete(id);
    if (!f.down) return;
    const seconds = (performance.now() - f.at) / 1000;
    this.o.events?.failoverSeconds(seconds);
    this.logger.info({ store: id, ms: Math.round(seconds * 1000) }, "cluster slots store-decided again");
  }

  /** A refresh now, or as soon as the last one is REFRESH_MIN_GAP_MS old. */
  private refreshSoon(reason: string): void {
    if (this.closing || this.refreshing) return;
    this.schedule(Math.max(0, this.lastRefreshAt + REFRESH_MIN_GAP_MS - performance.now()), reason);
  }

  private schedule(delayMs: number, reason: string): void {
    const due = performance.now() + delayMs;
    if (this.timer !== undefined && this.timerDueAt <= due) return;
    clearTimeout(this.timer);
    this.timerDueAt = due;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerDueAt = Infinity;
      void this.refresh(reason);
    }, delayMs);
    this.timer.unref();
  }

  /** Asks every usable node (all of them when none is) for its view, merging each as it comes. */
  private async refresh(reason: string): Promise<void> {
    if (this.closing || this.refreshing) return;
    this.refreshing = true;
    this.lastRefreshAt = performance.now();
    const all = [...this.nodes.values()];
    const usable = all.filter((n) => n.usable);
    let answered = 0;
    await Promise.all(
      (usable.length ? usable : all).map((n) =>
        n.command(["CLUSTER", "NODES"], this.askTimeoutMs).then(
          (text) => {
            answered++;
            this.merge(String(text), reason);
          },
          () => {},
        ),
      ),
    );
    this.o.events?.topologyRefresh(answered > 0);
    this.refreshing = false;
    if (this.closing) return;
    this.schedule(this.needsWatch() ? REFRESH_WHILE_DOWN_MS : REFRESH_IDLE_MS, "periodic");
  }

  private merge(text: string, reason: string): void {
    const view = parseClusterNodes(text);
    if (view.length === 0) return;
    const moved = this.map.merge(view);
    if (!this.mapped) {
      this.mapped = true;
      this.logger.info({ store: "redis-cluster", nodes: view.length }, "rate-limit store up");
      // A startup node named otherwise by the cluster (a hostname) is left for the address the cluster gives.
      const named = new Set(view.map((n) => n.addr));
      for (const [id, n] of this.nodes) {
        if (named.has(id)) continue;
        this.nodes.delete(id);
        void n.close();
      }
    }
    for (const n of view) this.node(n.addr);
    if (moved.length === 0) return;
    this.owners = new Set(this.map.counts().perNode.keys());
    const from = new Set<string>();
    const to = new Set<string>();
    for (const m of moved) {
      if (m.from) from.add(m.from);
      to.add(m.to);
    }
    // The failover of a node whose slots moved ends with the first answer of the node that took them.
    for (const id of from) {
      const f = this.failedAt.get(id);
      if (f === undefined) continue;
      this.failedAt.delete(id);
      for (const t of to) {
        const g = this.failedAt.get(t);
        this.failedAt.set(t, { at: Math.min(f.at, g?.at ?? Infinity), down: f.down || (g?.down ?? false) });
      }
    }
    const moves = moved.filter((m) => m.from !== undefined).length; // not a slot first learnt
    if (moves === 0) return;
    this.o.events?.slotsMoved(moves);
    this.logger.warn({ store: "redis-cluster", slots: moves, from: [...from], to: [...to], reason }, "cluster slots moved");
    // A topology change: open circuits probe now, not at their next interval.
    for (const n of this.nodes.values()) n.probeNow();
  }

  /** Whether some slot's node is not usable, or a node gave trouble lately: keep looking often. */
  private needsWatch(): boolean {
    if (performance.now() < this.troubleUntil || !this.mapped) return true;
    const { perNode, unowned } = this.map.counts();
    if (unowned > 0) return true;
    for (const id of perNode.keys()) if (!this.nodes.get(id)?.usable) return true;
    return false;
  }
}
