// A real MemoryStore behind a gate the test opens: while held, every apply() waits, so calls are
// provably inside the server (waiting on the store) when a test shuts it down, times it out or
// fills its streams. The store itself is real; nothing about gRPC is simulated.
import { MemoryStore } from "../../src/store/memory.js";
import type { Check, CheckResult, Store, StoreStatus } from "../../src/store/store.js";

export class GatedStore implements Store {
  readonly name = "gated-memory";
  /** apply() calls that reached the store (held or not). */
  arrivals = 0;
  private held = false;
  private readonly waiting: (() => void)[] = [];
  private readonly watchers = new Set<() => void>();

  constructor(readonly inner: MemoryStore = new MemoryStore()) {}

  /** From now on, apply() waits until release() or releaseOne(). */
  hold(): void {
    this.held = true;
  }

  /** Lets every waiting call through and stops holding. */
  release(): void {
    this.held = false;
    for (const go of this.waiting.splice(0)) go();
  }

  /** Lets the oldest waiting call through; keeps holding the others and later ones. */
  releaseOne(): void {
    this.waiting.shift()?.();
  }

  /** Calls waiting at the gate now. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Resolves once `n` calls wait at the gate. */
  whenWaiting(n: number, timeoutMs = 10_000): Promise<void> {
    return this.when(() => this.waiting.length >= n, `${n} calls waiting at the store gate (have ${this.waiting.length})`, timeoutMs);
  }

  /** Resolves once `n` calls have reached the store in all. */
  whenArrived(n: number, timeoutMs = 10_000): Promise<void> {
    return this.when(() => this.arrivals >= n, `${n} store calls (have ${this.arrivals})`, timeoutMs);
  }

  status(): StoreStatus {
    return this.inner.status();
  }

  groupOf(_hashTag: string): number {
    return this.inner.groupOf();
  }

  async apply(group: number, checks: Check[], dryRun?: boolean): Promise<CheckResult[]> {
    this.arrivals++;
    if (this.held) {
      const passed = new Promise<void>((resolve) => this.waiting.push(resolve));
      this.notify();
      await passed;
    } else {
      this.notify();
    }
    return this.inner.apply(group, checks, dryRun);
  }

  refund(group: number, checks: Check[], results: CheckResult[]): Promise<void> {
    return this.inner.refund(group, checks, results);
  }

  start(): Promise<void> {
    return this.inner.start();
  }

  close(): Promise<void> {
    this.release();
    return this.inner.close();
  }

  private notify(): void {
    for (const w of this.watchers) w();
  }

  private when(cond: () => boolean, what: string, timeoutMs: number): Promise<void> {
    if (cond()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!cond()) return;
        clearTimeout(timer);
        this.watchers.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.watchers.delete(check);
        reject(new Error(`timed out waiting for ${what}`));
      }, timeoutMs);
      this.watchers.add(check);
    });
  }
}
