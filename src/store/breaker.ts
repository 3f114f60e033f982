// Circuit breaker of one store node: after `threshold` failures in a row the node is treated as down
// and calls fail at once (the limiter answers by policy) while a probe checks the node in the background.

export type BreakerState = "closed" | "open";

export interface BreakerOptions {
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
  private opened = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly o: BreakerOptions) {}

  get isOpen(): boolean {
    return this.opened;
  }

  success(): void {
    this.failures = 0;
  }

  failure(reason: string): void {
    if (this.opened || ++this.failures < this.o.threshold) return;
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

  private scheduleProbe(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.o.probe().then(
        () => this.reset("probe answered"),
        () => this.opened && this.scheduleProbe(),
      );
    }, this.o.probeIntervalMs);
    this.timer.unref();
  }
}
