// An instance's view of its approximate limits' counters: per key, what the store held at the last
// sync plus the hits this instance admitted since (as the counters engine would store them), and the
// hits not yet sent. Bounded: a key with nothing unsent can be dropped, least recently used first.
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
  /** Local ms when the unsent hits must go at the latest (0: nothing unsent). */
  dueAtMs: number;
}

export class LocalView {
  /** Insertion order = least recently used first. */
  private readonly entries = new Map<string, ViewEntry>();
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

  get size(): number {
    return this.entries.size;
  }

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
      e = { check, group, syncIntervalMs, state: undefined, unsent: 0, sending: 0, dueAtMs: 0 };
    }
    this.entries.set(check.key, e);
    return e;
  }

  /** Entries with hits not yet sent. */
  *dirty(): IterableIterator<ViewEntry> {
    for (const e of this.entries.values()) if (e.unsent !== 0) yield e;
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
