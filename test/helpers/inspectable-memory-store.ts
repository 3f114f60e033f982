// A MemoryStore that tests can look into: its live keys and their expiry, as Redis's KEYS and PTTL would show.
import { MemoryStore } from "../../src/store/memory.js";

export class InspectableMemoryStore extends MemoryStore {
  /** Redis PTTL semantics: -2 = no such key. */
  pttl(key: string): number {
    const nowMs = this.nowMs();
    const expiresAtMs = this.expiryOf(key);
    return expiresAtMs !== undefined && nowMs <= expiresAtMs ? expiresAtMs - nowMs : -2;
  }

  /** Live (unexpired) keys. */
  keys(): string[] {
    const nowMs = this.nowMs();
    return [...this.heldKeys()].filter((k) => nowMs <= this.expiryOf(k)!);
  }

  /** Entries held, expired or not (what the maxKeys bound counts). */
  get size(): number {
    return [...this.heldKeys()].length;
  }

  private nowMs(): number {
    return Math.floor(this.clock.nowMicros() / 1000);
  }
}
