// In-process store (one instance; also the local fallback): the counters engine (counters/engine.ts,
// the same maths and all-or-nothing rule as lua/apply.lua) over a map with Redis-like expiry and a
// bound on the number of keys.
import type { Stored } from "../counters/check.js";
import { applyChecks, refundChecks, type Keyspace } from "../counters/engine.js";
import { systemClock, type Clock } from "./clock.js";
import type { Check, CheckResult, Store, StoreStatus } from "./store.js";
import type { SummaryRead, SummaryValue, SummaryWrite } from "./summaries.js";
import { MemorySummaries } from "./summaries-memory.js";

/** Keys held at most, unless configured (SLUICE_MEMORY_MAX_KEYS); the least recently used goes first. */
export const DEFAULT_MEMORY_MAX_KEYS = 1_000_000;

/** Entries examined per apply() by the incremental sweep of expired keys. */
const SWEEP_STEP = 8;

export class MemoryStore implements Store {
  readonly name = "memory";
  readonly inProcess = true;
  protected readonly clock: Clock;
  private readonly maxKeys: number;
  /** Insertion order = least recently used first. Protected for the tests' inspecting subclass. */
  protected readonly entries = new Map<string, Stored>();
  private sweeper: Iterator<[string, Stored]> | undefined;

  constructor(opts: { clock?: Clock; maxKeys?: number } = {}) {
    this.clock = opts.clock ?? systemClock;
    this.maxKeys = Math.max(1, opts.maxKeys ?? DEFAULT_MEMORY_MAX_KEYS);
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.entries.clear();
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
      const e = this.entries.get(key);
      if (!e) return undefined;
      this.entries.delete(key);
      if (nowMs > e.expiresAtMs) return undefined;
      // Touch: a refused (hot) key is in use too, and evicting it would hand out a fresh limit.
      this.entries.set(key, e);
      return e;
    },
    set: (key, value) => {
      this.entries.delete(key); // re-insert: most recently used goes last
      this.entries.set(key, value);
    },
  };

  private evict(): void {
    while (this.entries.size > this.maxKeys) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  /** Removes expired entries a few at a time, resuming where the previous call stopped. */
  private sweep(nowMs: number): void {
    this.sweeper ??= this.entries.entries();
    for (let i = 0; i < SWEEP_STEP; i++) {
      const next = this.sweeper.next();
      if (next.done) {
        this.sweeper = undefined;
        return;
      }
      const [key, e] = next.value;
      if (nowMs > e.expiresAtMs) this.entries.delete(key);
    }
  }
}
