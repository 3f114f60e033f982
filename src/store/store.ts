// The store contract: where counters live. One meaning per algorithm: lua/<name>.lua and its
// src/counters/<name>/math.ts agree (their parity tests prove it).
import type { Check } from "../counters/registry.js";
import type { CheckResult } from "../counters/check.js";
import type { SummaryStore } from "./summaries.js";

export type { Check } from "../counters/registry.js";
export type { CheckResult } from "../counters/check.js";
export type { QuotaPeriods } from "../counters/quota/math.js";

/**
 * One key of a lease call (approximate limits): give back `back` unused units of an earlier lease, charged in
 * the window or period ending at backEndMs (0: none), then take up to `want` units, at least `need` (the
 * algorithm's own check decides what fits). want 0: give back only.
 */
export interface LeaseEntry {
  check: Check;
  want: number;
  need: number;
  back: number;
  backEndMs: number;
}

/** Per entry: the units taken (0: refused), and the decision for `need` more against what is left. */
interface LeaseResult {
  taken: number;
  probe: CheckResult;
}

/** The store's time (µs) and each entry's result, in order. */
export interface LeaseReply {
  nowUs: number;
  results: LeaseResult[];
}

/** What a Redis node's user may not run of what sluice sends (acl-check.ts), for /readyz and the log. */
export interface Permissions {
  /** ok: every needed command is allowed; missing: some are not; unchecked: the server cannot tell (why in reason). */
  state: "ok" | "missing" | "unchecked";
  /** As redis-commands.ts names them. */
  missing?: string[];
  /** missing: the ACL command that grants them. */
  fix?: string;
  reason?: string;
}

/** Health of one store node, for /readyz, metrics and logs. */
export interface NodeStatus {
  /** host:port (never a URL: it may carry a password), "sentinel:NAME" (a Sentinel-monitored master), or "memory". */
  id: string;
  state: "up" | "down" | "circuit_open";
  /** Calls sent to the node and waiting for its reply (0 for the memory store). */
  inFlight: number;
  /** Sentinel only: host:port of the master the sentinels named at the last connect (it moves on failover). */
  master?: string;
  /** Cluster only: the node's role in the slot map sluice follows now. */
  role?: "master" | "replica";
  /** Cluster only: slots the node serves. */
  slots?: number;
  /** Cluster only: host:port of a replica's master. */
  replicaOf?: string;
  /** Redis: how its scripts are called, chosen at connect: "function" (FCALL, Redis 7+) or "evalsha". */
  scripts?: "function" | "evalsha";
  /** Redis: what its user may not run of what sluice sends, checked at each connect (acl-check.ts). */
  permissions?: Permissions;
}

export interface StoreStatus {
  kind: string;
  /** The nodes counters live on (a Cluster's: the masters serving slots). */
  nodes: NodeStatus[];
  /** Cluster only: the other nodes the cluster lists (replicas, failed masters without slots). */
  replicas?: NodeStatus[];
  /** Cluster only: slots no node serves in the map sluice has. */
  unownedSlots?: number;
}

/**
 * Counters, split into groups: the keys of one group live on one store node (one Cluster slot) and are
 * evaluated together atomically. Every key of one descriptor shares a hash tag, so it lands in one group.
 * Summaries of refusals (summaries.ts) are optional: src/insight/ keeps none without them.
 */
export interface Store extends Partial<SummaryStore> {
  readonly name: string;
  /** Counts in this process's memory: a deny note would save nothing. */
  readonly inProcess?: boolean;
  /** Cheap: no I/O, the last known state of every node. */
  status(): StoreStatus;
  /**
   * The group holding keys with this hash tag (the text between the key's braces) of a limit whose unit
   * lasts unitSeconds (1: a per-second limit). Pure and cheap. A store may keep limits of some units apart
   * (split-by-unit.ts: the reference's per-second Redis); the others ignore unitSeconds.
   */
  groupOf(hashTag: string, unitSeconds?: number): number;
  /**
   * Evaluates checks of one group atomically: if any non-shadow check refuses, nothing is consumed from
   * any of them. Results come back in the order of the checks. dryRun: the request is refused
   * already (elsewhere); evaluate as if refused, consume nothing, report what is there.
   */
  apply(group: number, checks: Check[], dryRun?: boolean): Promise<CheckResult[]>;
  /** Gives back what an earlier apply of these checks consumed (another group refused the request). */
  refund(group: number, checks: Check[], results: CheckResult[]): Promise<void>;
  /**
   * Approximate limits: per entry, gives back unused units and takes a lease (lua/lease.lua), in one
   * atomic call for the keys of one group. A store that counts in this process has none: its approximate
   * limits are exact.
   */
  lease?(group: number, entries: readonly LeaseEntry[]): Promise<LeaseReply>;
  /** Connect / load scripts; resolves once the first attempt finished (success or logged failure). */
  start(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Raised by a store that could not answer (down, timeout, circuit open, an error reply). The limiter applies the
 * failure policy. The message is sluice's own sentence (store, what failed); `reason` is its short form and
 * `detail` the library's or the system's text, for a detail field only (store/failure-words.ts).
 */
export class StoreUnavailableError extends Error {
  readonly reason?: string;
  readonly detail?: string;
  /** The node could not be reached (as opposed to: it answered with an error). */
  readonly unreachable?: boolean;

  constructor(
    message: string,
    override readonly cause?: unknown,
    words?: { reason: string; detail: string; unreachable: boolean },
  ) {
    super(message);
    this.name = "StoreUnavailableError";
    if (words) {
      this.reason = words.reason;
      this.detail = words.detail;
      this.unreachable = words.unreachable;
    }
  }
}
