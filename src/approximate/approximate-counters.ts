// Approximate limits (`approximate: {sync_interval_ms}`): decided from this instance's view of the
// counter (the store's level at the last sync plus its own hits since) with the same engine as the
// memory store, and synced in batches: every interval, or early once a key's unsent hits reach a share
// of its limit, each store group gets one atomic call (lua/sync.lua) that adds this instance's hits and
// returns the global levels. A batch that fails is retried as it is (applied once: the store keeps the
// last batch number per instance); hits keep counting locally meanwhile and merge when the node is back.
import { randomBytes } from "node:crypto";
import type { Stored } from "../counters/check.js";
import { applyChecks, refundChecks } from "../counters/engine.js";
import { algorithm } from "../counters/registry.js";
import { systemClock, type Clock } from "../store/clock.js";
import type { Check, CheckResult, Store, SyncEntry } from "../store/store.js";
import { LocalView, type ViewEntry } from "./local-view.js";

/** Keys the local view holds, unless configured (SLUICE_APPROXIMATE_MAX_KEYS). */
export const DEFAULT_APPROXIMATE_MAX_KEYS = 100_000;
/** A key's unsent hits that trigger a sync before its interval ends, as a share of its capacity. */
export const EARLY_SYNC_SHARE = 0.1;
/** Keys per sync call at most (a longer script holds Redis longer); the rest go in the next call at once. */
const MAX_BATCH_KEYS = 500;

/** One approximate limit of a request: its check and where and how often it syncs. */
export interface ApproximateCheck {
  check: Check;
  group: number;
  syncIntervalMs: number;
}

export type SyncObserver = (ok: boolean, keys: number, seconds: number) => void;

interface Batch {
  entries: SyncEntry[];
  views: ViewEntry[];
  seq: number;
  instance: string;
}

/** A group's sync state: when it is due, the batch out or to retry, whether a call is in flight. */
interface GroupSync {
  dueAtMs: number;
  batch: Batch | undefined;
  inFlight: boolean;
}

export class ApproximateCounters {
  private readonly view: LocalView;
  private readonly clock: Clock;
  /** This process's name in sync marks: batches of another process (or an earlier run) are never mistaken for its own. */
  private readonly instance = randomBytes(9).toString("base64url");
  private seq = 0;
  /** The store's clock minus this one's, µs, from the last sync's reply. */
  private offsetUs = 0;
  private readonly groups = new Map<number, GroupSync>();
  private timer: NodeJS.Timeout | undefined;
  private timerAtMs = Infinity;
  private closed = false;
  private readonly onSync: SyncObserver | undefined;
  /** Limits decided here (metrics). */
  decisions = 0;

  constructor(
    private readonly store: Store & Required<Pick<Store, "sync">>,
    opts: { clock?: Clock; maxKeys?: number; onSync?: SyncObserver } = {},
  ) {
    this.clock = opts.clock ?? systemClock;
    this.view = new LocalView(Math.max(1, opts.maxKeys ?? DEFAULT_APPROXIMATE_MAX_KEYS));
    this.onSync = opts.onSync;
  }

  /** Hits admitted here and not yet acknowledged by the store (metrics). */
  get pendingHits(): number {
    return this.view.pendingHits;
  }

  /**
   * Decides the checks of one request from the local view, all or nothing as the store would (dryRun:
   * evaluate, count nothing). Undefined when the view has no room for a key (every key it holds has hits
   * not yet synced): the caller decides these limits exactly.
   */
  decide(list: readonly ApproximateCheck[], dryRun: boolean): CheckResult[] | undefined {
    const entries: ViewEntry[] = new Array(list.length);
    const checks: Check[] = new Array(list.length);
    for (let i = 0; i < list.length; i++) {
      const e = this.view.entry(list[i].check, list[i].group, list[i].syncIntervalMs);
      if (!e) return undefined;
      entries[i] = e;
      checks[i] = list[i].check;
    }
    const results = applyChecks(this.view.keyspace, checks, dryRun, this.storeNowUs());
    this.decisions += list.length;
    if (dryRun) return results;
    for (let i = 0; i < results.length; i++) if (!results[i].allowed && !checks[i].shadow) return results;
    const nowMs = this.nowMs();
    for (let i = 0; i < list.length; i++) {
      if (!results[i].allowed || checks[i].hits <= 0) continue;
      const e = entries[i];
      this.view.addUnsent(e, checks[i].hits);
      const early = e.unsent >= Math.max(1, EARLY_SYNC_SHARE * checks[i].capacity);
      this.due(e.group, early ? nowMs : nowMs + e.syncIntervalMs);
    }
    return results;
  }

  /** Gives back what decide() counted for a request another limit refused. */
  refund(list: readonly ApproximateCheck[], results: readonly CheckResult[]): void {
    const checks: Check[] = [];
    const taken: CheckResult[] = [];
    for (let i = 0; i < list.length; i++) {
      if (!results[i].allowed || list[i].check.hits <= 0) continue;
      checks.push(list[i].check);
      taken.push(results[i]);
    }
    if (checks.length === 0) return;
    refundChecks(this.view.keyspace, checks, taken, this.storeNowUs());
    for (const c of checks) {
      const e = this.view.get(c.key);
      if (e) this.view.removeUnsent(e, c.hits);
    }
  }

  /** Sends every unsent hit and waits for the answers, for at most timeoutMs (shutdown). */
  async flush(timeoutMs: number): Promise<void> {
    const deadline = this.nowMs() + timeoutMs;
    while (this.nowMs() < deadline && this.pendingHits > 0) {
      const groups = new Set<number>(this.view.dirtyGroups());
      for (const [g, s] of this.groups) if (s.batch) groups.add(g);
      await Promise.all([...groups].map((g) => this.syncGroup(g)));
      if (this.pendingHits > 0) await new Promise((r) => setTimeout(r, 20));
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private nowMs(): number {
    return Math.floor(this.clock.nowMicros() / 1000);
  }

  private storeNowUs(): number {
    return this.clock.nowMicros() + this.offsetUs;
  }

  private group(g: number): GroupSync {
    let s = this.groups.get(g);
    if (!s) this.groups.set(g, (s = { dueAtMs: Infinity, batch: undefined, inFlight: false }));
    return s;
  }

  /** The group syncs by atMs at the latest. */
  private due(g: number, atMs: number): void {
    const s = this.group(g);
    if (atMs >= s.dueAtMs) return;
    s.dueAtMs = atMs;
    if (!s.inFlight) this.schedule(atMs);
  }

  private schedule(atMs: number): void {
    if (this.closed || atMs >= this.timerAtMs) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAtMs = atMs;
    this.timer = setTimeout(() => this.tick(), Math.max(0, atMs - this.nowMs()));
    this.timer.unref();
  }

  /** Syncs the groups that are due and not in flight; a group in flight reschedules itself when answered. */
  private tick(): void {
    this.timer = undefined;
    this.timerAtMs = Infinity;
    const nowMs = this.nowMs();
    let next = Infinity;
    for (const [g, s] of this.groups) {
      if (s.inFlight) continue;
      if (s.dueAtMs <= nowMs) void this.syncGroup(g);
      else next = Math.min(next, s.dueAtMs);
    }
    if (next < Infinity) this.schedule(next);
  }

  /** One sync call for a group: its batch to retry, or a new one from its keys with unsent hits. */
  private async syncGroup(g: number): Promise<void> {
    const s = this.group(g);
    if (s.inFlight) return;
    s.dueAtMs = Infinity;
    const batch = (s.batch ??= this.newBatch(g));
    if (!batch) return;
    s.inFlight = true;
    const sentUs = this.clock.nowMicros();
    let ok = false;
    try {
      const reply = await this.store.sync(g, batch.entries, batch);
      const gotUs = this.clock.nowMicros();
      this.offsetUs = reply.nowUs - (sentUs + gotUs) / 2;
      s.batch = undefined;
      for (let i = 0; i < batch.views.length; i++) {
        const e = batch.views[i];
        this.view.acknowledged(e, batch.entries[i].hits);
        // The store's level now holds this batch; the hits admitted since go on top of it.
        e.state = e.unsent > 0 ? charged(e.check, reply.states[i], e.unsent, reply.nowUs) : reply.states[i];
      }
      ok = true;
    } catch {
      // Kept as it is for the next interval: applied once, whenever it gets through.
    } finally {
      s.inFlight = false;
      this.onSync?.(ok, batch.entries.length, (this.clock.nowMicros() - sentUs) / 1e6);
    }
    if (this.closed) return;
    const nowMs = this.nowMs();
    if (!ok) {
      let interval = Infinity;
      for (const v of batch.views) interval = Math.min(interval, v.syncIntervalMs);
      this.due(g, nowMs + interval);
    } else if (this.view.hasUnsent(g)) {
      // Hits that came while the call was out: due one interval after it was sent, or now if overdue.
      this.due(g, s.dueAtMs);
    }
    if (s.dueAtMs <= nowMs) void this.syncGroup(g);
    else if (s.dueAtMs < Infinity) this.schedule(s.dueAtMs);
  }

  private newBatch(g: number): Batch | undefined {
    const taken = this.view.takeUnsent(g, MAX_BATCH_KEYS);
    if (taken.length === 0) return undefined;
    const entries: SyncEntry[] = new Array(taken.length);
    const views: ViewEntry[] = new Array(taken.length);
    for (let i = 0; i < taken.length; i++) {
      entries[i] = { check: taken[i].view.check, hits: taken[i].hits };
      views[i] = taken[i].view;
    }
    return { entries, views, seq: ++this.seq, instance: this.instance };
  }
}

/** A stored value with `hits` more, as the store's charge would leave it (lua/sync.lua), at the store's time. */
function charged(check: Check, stored: Stored | undefined, hits: number, nowUs: number): Stored {
  const a = algorithm(check.algorithm);
  const b = a.bind(check, Math.floor(nowUs / 1000));
  return a.save(check, a.charge(check, a.level(check, stored, nowUs, b), hits), nowUs, b);
}
