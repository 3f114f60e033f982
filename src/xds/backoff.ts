// Waits between attempts to reach the control plane. The reference's meaning (jpillora/backoff as its xDS
// provider uses it): attempt n waits initial x factor^n, capped at max; with jitter a uniform pick between
// initial and that. A factor of 1 or less (the reference's default 0.5) keeps every wait at the initial one.

export interface BackoffSettings {
  initialMs: number;
  maxMs: number;
  /** Growth per attempt; <= 0 means 2, as in the reference. */
  factor: number;
  jitter: boolean;
}

export class Backoff {
  private attempt = 0;

  constructor(
    private readonly s: BackoffSettings,
    private readonly random: () => number = Math.random,
  ) {}

  /** The wait before the next attempt (each call counts one attempt). */
  next(): number {
    const min = this.s.initialMs;
    const max = Math.max(this.s.maxMs, min);
    const factor = this.s.factor > 0 ? this.s.factor : 2;
    let ms = min * factor ** this.attempt++;
    if (this.s.jitter) ms = this.random() * (ms - min) + min;
    if (!Number.isFinite(ms)) return max;
    return Math.min(max, Math.max(min, ms));
  }

  /** After a stream that worked: the next failure starts from the initial wait again. */
  reset(): void {
    this.attempt = 0;
  }
}

/** A wait around `ms`, spread by +/- half of it (the reference's linear backoff with jitter 0.5 between dials). */
export function linearJitter(ms: number, random: () => number = Math.random): number {
  return ms * (0.5 + random());
}
