// A MemoryStore that tests can look into: its live keys and their expiry, as Redis's KEYS and PTTL would show.
import { MemoryStore } from "../../src/store/memory.js";

export class InspectableMemoryStore extends MemoryStore {
  /** Redis PTTL semantics: -2 = no such key. */
  pttl(key: string): number {
    const nowMs = this.nowMs();
    const e = this.entries.get(key);
    return e && nowMs <= e.expiresAtMs ? e.expiresAtMs - nowMs : -2;
  }

  /** Live (unexpired) keys. */
  keys(): string[] {
    const nowMs = this.nowMs();
    return [...this.entries].filter(([, e]) => nowMs <= e.expiresAtMs).map(([k]) => k);
  }

  /** Entries held, expired or not (what the maxKeys bound counts). */
  get size(): number {
    return this.entries.size;
  }

  private nowMs(): number {
    return Math.floor(this.clock.nowMicros() / 1000);
  }
}
