// In-process store (one instance; also the local fallback): the counters engine (counters/engine.ts,
// the same maths and all-or-nothing rule as lua/apply.lua) over a map with Redis-like expiry and a
// bound on the number of keys. A key maps to a slot of packed numbers (memory-slots.ts), not to objects.
import { SETTINGS } from "../core/settings-table.js";
import { applyChecks, refundChecks, type Keyspace } from "../counters/engine.js";
import { systemClock, type Clock } from "./clock.js";
import { Slots } from "./memory-slots.js";
import type { Check, CheckResult, Store, StoreStatus } from "./store.js";
import type { SummaryRead, SummaryValue, SummaryWrite } from "./summaries.js";
import { MemorySummaries } from "./summaries-memory.js";

/** Keys held at most, unless configured (SLUICE_MEMORY_MAX_KEYS); the least recently used goes first. */
const DEFAULT_MEMORY_MAX_KEYS = SETTINGS.MEMORY_MAX_KEYS.default;

/** Entries examined per apply() by the incremental sweep of expired keys. */
const SWEEP_STEP = 8;

export class MemoryStore implements Store {
  readonly name = "memory";
  readonly inProcess = true;
  protected readonly clock: Clock;
  private readonly maxKeys: number;
  /** Key -> slot. The slots hold the recency order: a read or a write moves no entry here. */
  private readonly entries = new Map<string, number>();
  private readonly slots = new Slots();
  /** The next slot the incremental sweep looks at. */
  private sweepAt = 0;

  constructor(opts: { clock?: Clock; maxKeys?: number } = {}) {
    this.clock = opts.clock ?? systemClock;
    this.maxKeys = Math.max(1, opts.maxKeys ?? DEFAULT_MEMORY_MAX_KEYS);
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.entries.clear();
    this.slots.clear();
    this.sweepAt = 0;
  }

  status(): StoreStatus {
    return { kind: "memory", nodes: [{ id: "memory", state: "up", inFlight: 0 }] };
  }

  groupOf(): number {
    return 0;
  }

  private summaries: MemorySummaries | undefined;

  writeSummaries(group: number, writes: readonly SummaryWrite[]): Promise<void> {
    return (this.summaries ??= new MemorySummaries(this.clock)).writeSummaries(group, writes);
  }

  readSummaries(group: number, reads: readonly SummaryRead[]): Promise<SummaryValue[]> {
    return (this.summaries ??= new MemorySummaries(this.clock)).readSummaries(group, reads);
  }

  // Synchronous from start to end inside the async function: no other call can interleave.
  async apply(_group: number, checks: Check[], dryRun = false): Promise<CheckResult[]> {
    const nowUs = this.clock.nowMicros();
    this.sweep(Math.floor(nowUs / 1000));
    const results = applyChecks(this.keyspace, checks, dryRun, nowUs);
    this.evict();
    return results;
  }

  async refund(_group: number, checks: Check[], results: CheckResult[]): Promise<void> {
    refundChecks(this.keyspace, checks, results, this.clock.nowMicros());
  }

  /** The engine's view of the entries: Redis drops a key once its expiry time has passed; a read marks it used. */
  private readonly keyspace: Keyspace = {
    get: (key, nowMs) => {
      const slot = this.entries.get(key);
      if (slot === undefined) return undefined;
      if (nowMs > this.slots.expiresAtMs(slot)) {
        this.entries.delete(key);
        this.slots.release(slot);
        return undefined;
      }
      // Touch: a refused (hot) key is in use too, and evicting it would hand out a fresh limit.
      this.slots.touch(slot);
      return this.slots.read(slot);
    },
    set: (key, value) => {
      const slot = this.entries.get(key);
      if (slot === undefined) {
        const held = flatKey(key);
        this.entries.set(held, this.slots.add(held, value));
        return;
      }
      this.slots.write(slot, value);
      this.slots.touch(slot);
    },
  };

  /** Expiry of a key held, expired or not (ms); undefined when not held. For the tests' inspecting subclass. */
  protected expiryOf(key: string): number | undefined {
    const slot = this.entries.get(key);
    return slot === undefined ? undefined : this.slots.expiresAtMs(slot);
  }

  /** Keys held, expired or not (what the maxKeys bound counts). */
  protected heldKeys(): IterableIterator<string> {
    return this.entries.keys();
  }

  private evict(): void {
    while (this.entries.size > this.maxKeys) {
      const slot = this.slots.oldest();
      this.entries.delete(this.slots.keyOf(slot)!);
      this.slots.release(slot);
    }
  }

  /** Removes expired entries a few slots at a time, resuming where the previous call stopped. */
  private sweep(nowMs: number): void {
    for (let i = 0; i < SWEEP_STEP; i++) {
      if (this.sweepAt >= this.slots.size()) {
        this.sweepAt = 0;
        return;
      }
      const slot = this.sweepAt++;
      const key = this.slots.keyOf(slot);
      if (key !== undefined && nowMs > this.slots.expiresAtMs(slot)) {
        this.entries.delete(key);
        this.slots.release(slot);
      }
    }
  }
}

/**
 * The key as a flat string of its own. A key built by concatenation is a tree of string pieces, which a
 * map keeps whole (64 bytes more per key in a map of 50,000); a property name is always flat (internalized).
 */
function flatKey(key: string): string {
  for (const k in { [key]: 0 }) return k;
  return key;
}
