// Circuit breaker of one store node: after `threshold` failures in a row the node is treated as down
// and calls fail at once (the limiter answers by policy) while a probe checks the node in the background.
// Failures count only as independent evidence: calls that were in flight together when one stall hit
// (64 concurrent calls timing out in the same few ms) are one failure, not 64, so a short stall under
// load does not open the circuit and hand out failure-policy answers for a whole probe interval.
import { SETTINGS } from "../core/settings-table.js";

/** Consecutive failures that open a node's circuit, unless configured (SLUICE_CIRCUIT_FAILURES). */
export const DEFAULT_BREAKER_THRESHOLD = SETTINGS.CIRCUIT_FAILURES.default;
/** Time between probes of an open circuit, unless configured (SLUICE_CIRCUIT_PROBE_MS). */
export const DEFAULT_PROBE_INTERVAL_MS = SETTINGS.CIRCUIT_PROBE_MS.default;

export type BreakerState = "closed" | "open";

interface BreakerOptions {
  /** Consecutive failures that open the circuit. */
  threshold: number;
  /** Time between probes while open. */
  probeIntervalMs: number;
  /** Resolves when the node answers again. */
  probe: () => Promise<unknown>;
  onChange: (state: BreakerState, reason: string) => void;
}

export class CircuitBreaker {
  private failures = 0;
  /** When the last counted failure was seen (performance.now() ms). */
  private lastFailureAt = -Infinity;
  private opened = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private probing = false;

  constructor(private readonly o: BreakerOptions) {}

  get isOpen(): boolean {
    return this.opened;
  }

  success(): void {
    this.failures = 0;
  }

  /** A call that started at `startedAt` (performance.now() ms) failed. */
  failure(reason: string, startedAt: number): void {
    if (this.opened || startedAt < this.lastFailureAt) return; // in flight during the failure already counted
    this.count(reason);
  }

  /**
   * The node stayed silent another timeout (no call was sent to it meanwhile: see ReplyWatch.silent): one
   * more failure, as the call that would have waited through it.
   */
  stillSilent(reason: string): void {
    if (!this.opened) this.count(reason);
  }

  private count(reason: string): void {
    this.lastFailureAt = performance.now();
    if (++this.failures < this.o.threshold) return;
    this.opened = true;
    this.o.onChange("open", reason);
    this.scheduleProbe();
  }

  /** The node is known good again (e.g. reconnected and scripts loaded): close without waiting for a probe. */
  reset(reason: string): void {
    this.failures = 0;
    if (!this.opened) return;
    this.opened = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.o.onChange("closed", reason);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Something changed (the topology moved): probe an open circuit now rather than at the next interval. */
  probeNow(): void {
    if (!this.opened || this.probing || this.stopped) return;
    clearTimeout(this.timer);
    this.scheduleProbe(0);
  }

  private scheduleProbe(delayMs = this.o.probeIntervalMs): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.probing = true;
      this.o
        .probe()
        .then(
          () => this.reset("probe answered"),
          () => this.opened && this.scheduleProbe(),
        )
        .finally(() => {
          this.probing = false;
        });
    }, delayMs);
    this.timer.unref();
  }
}
