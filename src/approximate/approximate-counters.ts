// Approximate limits (`approximate: {sync_interval_ms}`): decided from this instance's view of the
// counter (the store's level at the last sync plus its own hits since) with the same engine as the
// memory store, and synced in batches: every interval, or early once a key's unsent hits reach a share
// of its limit, each store group gets one atomic call (lua/sync.lua) that adds this instance's hits and
// returns the global levels. A batch that fails is retried as it is (applied once: the store keeps the
// last batch number per instance); hits keep counting locally meanwhile and merge when the node is back.
import { randomBytes } from "node:crypto";
import { algorithm } from "../counters/registry.js";
import type { Stored } from "../counters/check.js";
import { applyChecks, refundChecks } from "../counters/engine.js";
import { syncMarkKey } from "../limiter/keys.js";
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
  markKey: string;
}

export class ApproximateCounters {
  private readonly view: LocalView;
  private readonly clock: Clock;
  /** This process's name in sync marks: batches of another process (or an earlier run) are never mistaken for its own. */
  private readonly instance = randomBytes(9).toString("base64url");
  private seq = 0;
  /** The store's clock minus this one's, µs, from the last sync's reply. */
  private offsetUs = 0;
  /** Per group: the batch sent or to be retried, and whether a call is in flight. */
  private readonly batches = new Map<number, Batch>();
  private readonly inFlight = new Set<number>();
  private timer: NodeJS.Timeout | undefined;
  private timerAtMs = Infinity;
  private closed = false;
  /** Answers decided here, calls made, keys sent (metrics). */
  decisions = 0;

  constructor(
    private readonly store: Store & Required<Pick<Store, "sync">>,
    opts: { clock?: Clock; maxKeys?: number; onSync?: SyncObserver } = {},
  ) {
    this.clock = opts.clock ?? systemClock;
    this.view = new LocalView(Math.max(1, opts.maxKeys ?? DEFAULT_APPROXIMATE_MAX_KEYS));
    this.onSync = opts.onSync;
  }

  private readonly onSync: SyncObserver | undefined;

  /** Hits admitted here and not yet acknowledged by the store (metrics). */
  get pendingHits(): number {
    let n = 0;
    for (const e of this.view.dirty()) n += e.unsent;
    for (const b of this.batches.values()) for (const s of b.entries) n += s.hits;
    return n;
  }

  /**
   * Decides the checks of one request from the local view, all or nothing as the store would (dryRun:
   * evaluate, count nothing). Undefined when the view has no room for a key (every key it holds has hits
   * not yet synced): the caller decides these limits exactly.
   */
  decide(list: readonly ApproximateCheck[], dryRun: boolean): CheckResult[] | undefined {
    const entries: ViewEntry[] = new Array(list.length);
    for (let i = 0; i < list.length; i++) {
      const e = this.view.entry(list[i].check, list[i].group, list[i].syncIntervalMs);
      if (!e) return undefined;
      entries[i] = e;
    }
    const checks = list.map((a) => a.check);
    const results = applyChecks(this.view.keyspace, checks, dryRun, this.storeNowUs());
    this.decisions += list.length;
    if (dryRun || results.some((r, i) => !r.allowed && !checks[i].shadow)) return results;
    const nowMs = this.nowMs();
    for (let i = 0; i < list.length; i++) {
      if (!results[i].allowed || checks[i].hits <= 0) continue;
      const e = entries[i];
      if (e.unsent === 0) e.dueAtMs = nowMs + e.syncIntervalMs;
      e.unsent += checks[i].hits;
      if (e.unsent >= Math.max(1, EARLY_SYNC_SHARE * checks[i].capacity)) e.dueAtMs = nowMs;
      this.schedule(e.dueAtMs);
    }
    return results;
  }

  /** Gives back what decide() counted for a request another limit refused. */
  refund(list: readonly ApproximateCheck[], results: readonly CheckResult[]): void {
    const taken = list.filter((a, i) => results[i].allowed && a.check.hits > 0);
    if (taken.length === 0) return;
    refundChecks(
      this.view.keyspace,
      taken.map((a) => a.check),
      results.filter((r, i) => r.allowed && list[i].check.hits > 0),
      this.storeNowUs(),
    );
    for (const a of taken) {
      const e = this.view.get(a.check.key);
      // Hits already sent stay counted: the store has (or will have) them.
      if (e) e.unsent -= Math.min(e.unsent, a.check.hits);
    }
  }

  /** Sends every unsent hit and waits for the answers, for at most timeoutMs (shutdown). */
  async flush(timeoutMs: number): Promise<void> {
    const deadline = this.nowMs() + timeoutMs;
    while (this.nowMs() < deadline && (this.pendingHits > 0 || this.inFlight.size > 0)) {
      const groups = new Set<number>(this.batches.keys());
      for (const e of this.view.dirty()) groups.add(e.group);
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

  private schedule(atMs: number): void {
    if (this.closed || atMs >= this.timerAtMs) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAtMs = atMs;
    this.timer = setTimeout(() => this.tick(), Math.max(0, atMs - this.nowMs()));
    this.timer.unref();
  }

  /** Syncs every group with a key due (or a batch to retry), then waits for the next due key. */
  private tick(): void {
    this.timer = undefined;
    this.timerAtMs = Infinity;
    const nowMs = this.nowMs();
    const due = new Set<number>(this.batches.keys());
    let next = Infinity;
    for (const e of this.view.dirty()) {
      if (e.dueAtMs <= nowMs) due.add(e.group);
      else next = Math.min(next, e.dueAtMs);
    }
    for (const g of due) void this.syncGroup(g);
    if (next < Infinity) this.schedule(next);
  }

  /** One sync call for a group: its batch to retry, or a new one from its keys with unsent hits. */
  private async syncGroup(group: number): Promise<void> {
    if (this.inFlight.has(group)) return;
    const batch = this.batches.get(group) ?? this.newBatch(group);
    if (!batch) return;
    this.inFlight.add(group);
    const sentUs = this.clock.nowMicros();
    let ok = false;
    try {
      const reply = await this.store.sync(group, batch.entries, batch);
      const gotUs = this.clock.nowMicros();
      this.offsetUs = reply.nowUs - (sentUs + gotUs) / 2;
      this.batches.delete(group);
      for (let i = 0; i < batch.views.length; i++) {
        const e = batch.views[i];
        e.sending -= batch.entries[i].hits;
        // The store's level now holds this batch; the hits admitted since go on top of it.
        e.state = e.unsent > 0 ? charged(e.check, reply.states[i], e.unsent, reply.nowUs) : reply.states[i];
      }
      ok = true;
    } catch {
      // Kept as it is for the next interval: applied once, whenever it gets through.
    } finally {
      this.inFlight.delete(group);
      this.onSync?.(ok, batch.entries.length, (this.clock.nowMicros() - sentUs) / 1e6);
    }
    if (this.closed) return;
    if (!ok) {
      this.schedule(this.nowMs() + Math.min(...batch.views.map((v) => v.syncIntervalMs)));
      return;
    }
    // Keys left over (a full batch, or hits that became due while the call was out) go at once.
    const nowMs = this.nowMs();
    for (const e of this.view.dirty()) if (e.group === group && e.dueAtMs <= nowMs) return void this.syncGroup(group);
  }

  private newBatch(group: number): Batch | undefined {
    const views: ViewEntry[] = [];
    const entries: SyncEntry[] = [];
    for (const e of this.view.dirty()) {
      if (e.group !== group) continue;
      views.push(e);
      entries.push({ check: e.check, hits: e.unsent });
      e.sending += e.unsent;
      e.unsent = 0;
      e.dueAtMs = 0;
      if (entries.length === MAX_BATCH_KEYS) break;
    }
    if (entries.length === 0) return undefined;
    const batch = { entries, views, seq: ++this.seq, markKey: syncMarkKey(entries[0].check.key, this.instance) };
    this.batches.set(group, batch);
    return batch;
  }
}

/** A stored value with `hits` more, as the store's charge would leave it (lua/sync.lua), at the store's time. */
function charged(check: Check, stored: Stored | undefined, hits: number, nowUs: number): Stored {
  const a = algorithm(check.algorithm);
  const b = a.bind(check, Math.floor(nowUs / 1000));
  return a.save(check, a.charge(check, a.level(check, stored, nowUs, b), hits), nowUs, b);
}
