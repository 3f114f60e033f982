// An instance's view of its approximate limits' counters: per key, what the store held at the last
// sync plus the hits this instance admitted since (as the counters engine would store them), and the
// hits not yet sent, kept per store group so a sync touches only its group's keys with unsent hits.
// Bounded: a key with nothing unsent or in flight can be dropped, least recently used first.
import type { Stored } from "../counters/check.js";
import type { Keyspace } from "../counters/engine.js";
import type { Check } from "../store/store.js";

export interface ViewEntry {
  /** The latest check for the key (its algorithm and parameters). */
  check: Check;
  group: number;
  syncIntervalMs: number;
  /** The store's value at the last sync with the hits since applied; undefined: none known. */
  state: Stored | undefined;
  /** Hits admitted here and not yet in a batch. */
  unsent: number;
  /** Hits in a batch sent and not yet answered (or to be retried). */
  sending: number;
}

export class LocalView {
  /** Insertion order = least recently used first. */
  private readonly entries = new Map<string, ViewEntry>();
  /** Per group, its entries with unsent hits. */
  private readonly dirtyByGroup = new Map<number, Set<ViewEntry>>();
  /** Hits admitted here and not acknowledged by the store: unsent and in batches. */
  pendingHits = 0;

  /** The engine's view of the entries; a value past its expiry is gone, as in Redis (its unsent hits stay). */
  readonly keyspace: Keyspace = {
    get: (key, nowMs) => {
      const s = this.entries.get(key)?.state;
      return s && nowMs <= s.expiresAtMs ? s : undefined;
    },
    set: (key, value) => {
      const e = this.entries.get(key);
      if (e) e.state = value;
    },
  };

  constructor(private readonly maxKeys: number) {}

  get(key: string): ViewEntry | undefined {
    return this.entries.get(key);
  }

  /**
   * The entry of a check's key, made when new (touching it either way); undefined when the view is full
   * of keys with hits not yet synced, which cannot be dropped without losing them.
   */
  entry(check: Check, group: number, syncIntervalMs: number): ViewEntry | undefined {
    let e = this.entries.get(check.key);
    if (e) {
      this.entries.delete(check.key);
      e.check = check;
      e.syncIntervalMs = syncIntervalMs;
    } else {
      if (this.entries.size >= this.maxKeys && !this.dropOneClean()) return undefined;
      e = { check, group, syncIntervalMs, state: undefined, unsent: 0, sending: 0 };
    }
    this.entries.set(check.key, e);
    return e;
  }

  /** Counts hits admitted for an entry; true when the entry's group had nothing unsent before. */
  addUnsent(e: ViewEntry, hits: number): boolean {
    this.pendingHits += hits;
    e.unsent += hits;
    let dirty = this.dirtyByGroup.get(e.group);
    const first = !dirty || dirty.size === 0;
    if (!dirty) this.dirtyByGroup.set(e.group, (dirty = new Set()));
    dirty.add(e);
    return first;
  }

  /** Takes back unsent hits (a refund); hits already sent stay counted. */
  removeUnsent(e: ViewEntry, hits: number): void {
    const n = Math.min(e.unsent, hits);
    e.unsent -= n;
    this.pendingHits -= n;
    if (e.unsent === 0) this.dirtyByGroup.get(e.group)?.delete(e);
  }

  /** The group's entries with unsent hits, at most `max`, with their hits, which move to sending. */
  takeUnsent(group: number, max: number): { view: ViewEntry; hits: number }[] {
    const dirty = this.dirtyByGroup.get(group);
    const out: { view: ViewEntry; hits: number }[] = [];
    if (!dirty) return out;
    for (const e of dirty) {
      out.push({ view: e, hits: e.unsent });
      dirty.delete(e);
      e.sending += e.unsent;
      e.unsent = 0;
      if (out.length === max) break;
    }
    return out;
  }

  /** The batch's hits were acknowledged by the store. */
  acknowledged(e: ViewEntry, hits: number): void {
    e.sending -= hits;
    this.pendingHits -= hits;
  }

  hasUnsent(group: number): boolean {
    return (this.dirtyByGroup.get(group)?.size ?? 0) > 0;
  }

  /** Groups with unsent hits. */
  dirtyGroups(): number[] {
    const out: number[] = [];
    for (const [g, set] of this.dirtyByGroup) if (set.size > 0) out.push(g);
    return out;
  }

  private dropOneClean(): boolean {
    for (const [key, e] of this.entries) {
      if (e.unsent === 0 && e.sending === 0) {
        this.entries.delete(key);
        return true;
      }
    }
    return false;
  }
}
