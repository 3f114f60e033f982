// The arithmetic of RLQS assignments, pure. An assignment is a lease: units taken from the store's counter
// before Envoy may spend them. Envoy 1.40 runs an assignment's token bucket starting full, refilling
// tokens_per_fill every fill_interval (whole seconds), and keeps it until the assignment is replaced or its
// time to live (whole seconds, from when it arrives) ends. So a bucket of max_tokens N refilling r per second
// admits at most N + r * t in t seconds: its budget, charged to the store before it is sent.

/** An assignment is charged this much past its time to live: Envoy starts its timer when the assignment arrives. */
export const SLACK_MS = 250;
/** Rate headroom over the demand observed: a lease that follows a rising demand. */
export const HEADROOM = 1.25;
/** A lease takes at most this share of what the store had left at its last answer: near the limit leases shrink. */
export const ROOM_SHARE = 0.5;

/** Units a rate lease (a bucket of `rate` tokens refilling `rate` a second) may admit in ttlSeconds. */
export function rateBudget(rate: number, lifeMs: number): number {
  return Math.ceil(rate * (1 + (lifeMs + SLACK_MS) / 1000));
}

/** The largest rate whose budget over ttlSeconds fits in `units`. */
export function rateFor(units: number, ttlSeconds: number): number {
  return Math.floor(units / (1 + ttlSeconds + SLACK_MS / 1000));
}

/** The rate to ask for: the demand observed in the last interval (requests a second, allowed and denied) with headroom. */
export function targetRate(demandPerSecond: number): number {
  return Math.max(1, Math.ceil(demandPerSecond * HEADROOM));
}

/** Units Envoy spends at `demand` requests a second over an assignment's life: the size of a burst lease. */
export function burstUnits(demandPerSecond: number, ttlSeconds: number): number {
  return Math.max(1, Math.ceil(demandPerSecond * ttlSeconds));
}

/**
 * A fresh lease's units: its rate's budget over ttl when that fits in a share of what the store had left;
 * otherwise (near the limit) a burst lease of what Envoy would spend at its demand in the lease's life (the
 * store gives what it has, up to that): units Envoy cannot spend in time would wait for its next report.
 */
export function freshWant(rate: number, demandPerSecond: number, ttlSeconds: number, storeRemaining: number): number {
  const full = rateBudget(rate, ttlSeconds * 1000);
  if (full <= Math.floor(storeRemaining * ROOM_SHARE)) return full;
  return burstUnits(demandPerSecond >= 0 ? demandPerSecond : rate, ttlSeconds);
}

/** Units granted short of a rate lease's budget: sent as a burst lease (exactly those units, no refill). */
export function isBurst(granted: number, rate: number, ttlSeconds: number): boolean {
  return granted < rateBudget(rate, ttlSeconds * 1000);
}

/**
 * Whole seconds an assignment may live from now: at most `capSeconds`, and (for a window) ending with its
 * slack before the window does, so its units are never spent in the next window. 0: none fits.
 */
export function ttlSeconds(nowMs: number, capSeconds: number, windowEndMs: number): number {
  if (windowEndMs <= 0) return capSeconds;
  return Math.max(0, Math.min(capSeconds, Math.floor((windowEndMs - nowMs - SLACK_MS) / 1000)));
}

/**
 * Units of a bucket's window that can go back to the store: charged, less what Envoy reported admitting in the
 * window, less every budget that may still admit (the current assignment's, and those replaced too recently to
 * be sure Envoy's reports already hold all they admitted). Never negative.
 */
export function spareUnits(charged: number, reportedAllowed: number, liveBudgets: number): number {
  return Math.max(0, Math.floor(charged - reportedAllowed - liveBudgets));
}

/** The demand moved enough to resize the lease (a fresh bucket in Envoy). */
export function rateChanged(current: number, target: number): boolean {
  return target > current * 1.25 || target < current * 0.6;
}
