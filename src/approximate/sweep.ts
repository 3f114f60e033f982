// The end-of-lease sweep: items due at a local ms, ended in steps of SWEEP_MS by one timer (unref'd) set
// for the earliest step that holds any, so a thousand leases ending cost one timer, not a thousand.

/** Ended leases are swept (their unused units queued for the store) in steps of this many ms. */
export const SWEEP_MS = 10;

export class Sweep<T> {
  /** Items by the step they are due in. */
  private readonly due = new Map<number, T[]>();
  private timer: NodeJS.Timeout | undefined;
  private atMs = Infinity;
  private stopped = false;

  /** onDue: called once per item whose step has come (nowMs: the sweep's time). */
  constructor(
    private readonly nowMs: () => number,
    private readonly onDue: (item: T, nowMs: number) => void,
  ) {}

  /** Due at atMs (local ms), swept in the first step at or after it. */
  add(atMs: number, item: T): void {
    const step = Math.ceil(atMs / SWEEP_MS);
    const list = this.due.get(step);
    if (list) list.push(item);
    else this.due.set(step, [item]);
    this.arm(step * SWEEP_MS, this.nowMs());
  }

  /** No more sweeps (what is still due stays so). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(atMs: number, nowMs: number): void {
    if (atMs >= this.atMs || this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.atMs = atMs;
    this.timer = setTimeout(() => this.sweep(), Math.max(0, atMs - nowMs));
    this.timer.unref();
  }

  /** Ends the items due and waits for the next step with any. */
  private sweep(): void {
    this.timer = undefined;
    this.atMs = Infinity;
    const nowMs = this.nowMs();
    const nowStep = Math.floor(nowMs / SWEEP_MS);
    let next = Infinity;
    for (const [step, list] of this.due) {
      if (step > nowStep) {
        next = Math.min(next, step);
        continue;
      }
      this.due.delete(step);
      for (const item of list) this.onDue(item, nowMs);
    }
    if (next < Infinity) this.arm(next * SWEEP_MS, nowMs);
  }
}
