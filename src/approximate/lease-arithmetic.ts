// The arithmetic of a lease (leases.ts), pure: how many units to take, a new lease's end and fading, what
// is left of it, what it gives back, and the figures answered from it. No store, no clock, no timers: the
// times are passed in (local ms and µs; the store's where named).
import type { CheckResult } from "../store/store.js";

/** A lease's units beyond the requests waiting for it: this share of what the store had left. */
export const ROOM_SHARE = 0.1;
/** A refusal is remembered at most this long (and at most one lease interval). */
export const MAX_REFUSAL_MS = 60_000;
/** Intervals a lease in steady use lives while the limit has ample room (a renewal per this many intervals). */
export const STEADY_INTERVALS = 2;
/** A renewed lease holds this many times the demand it saw, over its life: room for a busier interval. */
export const DEMAND_MARGIN = 1.5;
/** Demand is measured over at least this many ms of a lease's life (a lease cut short by its window's end). */
const MIN_DEMAND_SPAN_MS = 10;
/** A lease is renewed this long before its end (at most a quarter interval): requests meet the next, not a gap. */
export const RENEW_LEAD_MS = 10;

/** Units an instance took from the store's counter, to admit locally until it ends. */
export interface Lease {
  units: number;
  /** Units admitted (or reserved by a request still being decided) from it. */
  used: number;
  /** Local µs when the call that took it was sent. */
  startUs: number;
  /** Local ms: the lease ends here (its interval or two, or before its window's end by the store's clock). */
  endsAtMs: number;
  /** Local ms: its first interval's end, when it lives two (else endsAtMs): unused by then, it ends then. */
  midMs: number;
  /** Units used by midMs (0 before): what it used after is its last interval's use. */
  usedAtMid: number;
  /** Units the requests that waited for it took: a key used by those alone is not in steady use. */
  waited: number;
  /** The window its units were charged in (the store's ms; 0: a bucket), for the give-back. */
  chargedEndMs: number;
  /**
   * It ends with a window that resets whole at its end (a fixed window): its unused units are then worth
   * nothing to give back. A sliding window's still count (as the previous window's) and go back.
   */
  endsWithWindow: boolean;
  /** Token bucket: the refill that fades unused units, per second, once `slack` units of refill passed. */
  rate: number;
  slack: number;
  /**
   * Units taken for the requests waiting when it was taken: theirs at once (as an exact limit's hits are at
   * the store's time), so they do not fade; used first.
   */
  firm: number;
  ended: boolean;
}

/** The store's figures for a key at its last answer. */
export interface StoreFigures {
  /** What it had left. */
  storeRemaining: number;
  /** When it resets (local ms). */
  resetAtMs: number;
  /** Its window's end (the store's ms; 0: none). */
  periodEndMs: number;
  /** Whether it has answered yet (before: no reset to report). */
  answered: boolean;
}

/** Unused units of a lease at nowUs; a bucket's units beyond the firm ones fade once the refill they held back would have overflowed. */
export function available(l: Lease, nowUs: number): number {
  const unused = l.units - l.used;
  if (l.rate <= 0) return unused;
  const firm = Math.max(0, l.firm - l.used);
  const fade = Math.max(0, ((nowUs - l.startUs) / 1e6) * l.rate - l.slack);
  return firm + Math.max(0, unused - firm - fade);
}

/** Whether a live lease admits `need` units now. */
export function admits(l: Lease, need: number, nowMs: number, nowUs: number): boolean {
  return !l.ended && nowMs < l.endsAtMs && available(l, nowUs) >= need;
}

/** Units of a live lease not used (never below 0; metrics and figures). */
export function unused(l: Lease | undefined, nowUs: number): number {
  return l && !l.ended ? Math.max(0, available(l, nowUs)) : 0;
}

/** Whether units of a lease are still worth giving back: not when its window reset whole at its end. */
export function worthGivingBack(l: Lease, nowMs: number): boolean {
  return !(l.endsWithWindow && nowMs >= l.endsAtMs);
}

/** Units to give back when a lease ends now (0: none). */
export function unitsAtEnd(l: Lease, nowMs: number, nowUs: number): number {
  const left = available(l, nowUs);
  return left > 0 && worthGivingBack(l, nowMs) ? left : 0;
}

/**
 * Units to take: what the requests waiting need, plus a share of the room the store had left at its last
 * answer (the capacity before any) and of the previous lease's units not used: large while the limit has
 * room, down to the waiting requests near it. Never over the capacity.
 */
export function unitsToTake(storeRemaining: number, prev: Lease | undefined, demand: number, need: number, capacity: number): number {
  const room = storeRemaining + (prev && !prev.ended ? Math.max(0, prev.units - prev.used) : 0);
  return Math.min(Math.max(demand, need) + Math.floor(ROOM_SHARE * room), capacity);
}

/** What the store had left before the probe, from the probe's answer for `need` more (it reports what they would leave when they fit). */
export function remainingBeforeProbe(probe: { allowed: boolean; remaining: number }, need: number): number {
  return probe.allowed ? probe.remaining + need : probe.remaining;
}

/** A lease taken: the call's figures (local ms and µs, the store's time and window end) and the algorithm's. */
export interface LeaseTaken {
  taken: number;
  /** Local µs when the call was sent. */
  sentUs: number;
  intervalMs: number;
  /** The store's window end for the key (ms, 0: none) and the store's time (µs) of the answer. */
  periodEndMs: number;
  storeNowUs: number;
  /** The algorithm's count resets whole at its window's end (a fixed window). */
  resetsAtEnd: boolean;
  /** A bucket's refill per second (0: not a bucket). */
  rate: number;
  capacity: number;
  /** What the store had left before this take (remainingBeforeProbe). */
  storeRemaining: number;
  /** The units the requests waiting wanted, and the least one of them needed. */
  demand: number;
  need: number;
  /** Intervals it lives (leaseIntervals; default 1). */
  intervals?: number;
  /** Local µs when the store's answer arrived: its intervals count from here. */
  arrivedUs: number;
}

export function newLease(t: LeaseTaken): Lease {
  const sentMs = Math.floor(t.sentUs / 1000);
  // Its life counts from its arrival: a call slower than an interval (a busy host, a slow store) still brings
  // the requests that waited a lease to be answered from, not one already over. Its window's end counts from the send.
  const fromMs = Math.max(sentMs, Math.floor(t.arrivedUs / 1000));
  const midMs = fromMs + t.intervalMs;
  let endsAtMs = fromMs + t.intervalMs * Math.max(1, t.intervals ?? 1);
  let endsWithWindow = false;
  // A window's units count in that window only: the lease ends before it does by the store's clock
  // (measured from the send, so never later than the store's own end).
  if (t.periodEndMs > 0) {
    const windowEndMs = sentMs + (t.periodEndMs - Math.floor(t.storeNowUs / 1000));
    if (windowEndMs <= endsAtMs) {
      endsAtMs = windowEndMs;
      endsWithWindow = t.resetsAtEnd;
    }
  }
  // The bucket held less than storeRemaining + 1 + taken before: refill beyond the rest up to full is
  // refill a bucket without this lease would have lost, so the lease's unused tokens fade from then on.
  const slack = Math.max(0, t.capacity - (t.storeRemaining + 1 + t.taken));
  const firm = Math.min(t.taken, Math.max(t.demand, t.need));
  return {
    units: t.taken,
    used: 0,
    startUs: t.sentUs,
    endsAtMs,
    midMs: Math.min(midMs, endsAtMs),
    usedAtMid: 0,
    waited: Math.min(t.taken, t.demand),
    chargedEndMs: t.periodEndMs,
    endsWithWindow,
    rate: t.rate,
    slack,
    firm,
    ended: false,
  };
}

/**
 * What the sweep does with a lease at one of its interval ends: at the first of two, "keep" it when it was
 * used in that interval, else "end" it; at its end, "renew" it (give back and take the next in one call) when
 * it was used in its last interval beyond the requests that waited for it, else "end" it (give back only: a
 * key used once is not renewed).
 */
export function atIntervalEnd(l: Lease, atEnd: boolean): "keep" | "renew" | "end" {
  if (!atEnd) return l.used > 0 ? "keep" : "end";
  return l.used - Math.max(l.usedAtMid, l.waited) > 0 ? "renew" : "end";
}

/**
 * Local ms at which the sweep reaches a lease's end: RENEW_LEAD_MS (at most a quarter interval) before it, so
 * that the next lease is there when it ends; at its end when it ends with its window (taken earlier, the next
 * lease's units would be charged in the window that is ending). A first interval's end at or after it is not
 * checked apart.
 */
export function renewAtMs(l: Lease, intervalMs: number): number {
  return l.endsWithWindow ? l.endsAtMs : l.endsAtMs - Math.min(RENEW_LEAD_MS, Math.floor(intervalMs / 4));
}

/** Demand a lease saw, in units per interval: what it admitted over its life until nowMs. */
export function demandPerInterval(l: Lease, nowMs: number, intervalMs: number): number {
  const spanMs = Math.max(nowMs - Math.floor(l.startUs / 1000), MIN_DEMAND_SPAN_MS);
  return (Math.max(0, l.used) * intervalMs) / spanMs;
}

/** The next lease of a key in use: units to take and intervals it is to live. */
export interface Renewal {
  want: number;
  intervals: number;
}

/**
 * The next lease of a key in use, sized from the demand it saw (units per interval) and, for a bucket, the
 * refill of an interval (fade: what a lease's units fade by while the bucket is full): STEADY_INTERVALS of
 * demand (with DEMAND_MARGIN) and fade while that is at most ROOM_SHARE of the room (what the store had left
 * at its last answer plus the units this renewal gives back); else one interval of them, at most ROOM_SHARE
 * of the room (at least one unit), living one interval. Never over the capacity.
 */
export function renewal(demand: number, fade: number, room: number, capacity: number): Renewal {
  const perInterval = demand * DEMAND_MARGIN + fade;
  const steady = Math.ceil(STEADY_INTERVALS * perInterval);
  if (steady <= ROOM_SHARE * room && steady <= capacity) return { want: Math.max(1, steady), intervals: STEADY_INTERVALS };
  return { want: Math.min(Math.max(1, Math.min(Math.ceil(perInterval), Math.floor(ROOM_SHARE * room))), capacity), intervals: 1 };
}

/**
 * Intervals a lease taken lives: the renewal's plan only when the store gave all it asked and the units are
 * still at most ROOM_SHARE of what the store had before the take (its answer's remaining plus them); else one.
 */
export function leaseIntervals(planned: number, want: number, taken: number, storeRemainingAfter: number): number {
  return planned > 1 && taken >= want && taken <= ROOM_SHARE * (storeRemainingAfter + taken) ? planned : 1;
}

/** Local ms until which a refusal is remembered: its Retry-After, at most one lease interval and MAX_REFUSAL_MS. */
export function refusalUntilMs(sentMs: number, retryAfterMs: number, intervalMs: number): number {
  return sentMs + Math.min(retryAfterMs, intervalMs, MAX_REFUSAL_MS);
}

/** An allowed answer: what the store had left at its last answer plus the lease's unused units, up to the capacity. */
export function allowedFigures(f: StoreFigures, own: number, capacity: number, nowMs: number): CheckResult {
  return {
    allowed: true,
    remaining: Math.min(Math.floor(f.storeRemaining + own), capacity),
    resetSeconds: f.answered ? Math.max(Math.ceil((f.resetAtMs - nowMs) / 1000), 0) : 0,
    retryAfterMs: -1,
    periodEndMs: f.periodEndMs,
  };
}

/** A refusal remembered from the store, answered until it is due again (retryAtMs, local ms). */
export function rememberedRefusal(f: StoreFigures, retryAtMs: number, nowMs: number): CheckResult {
  return {
    allowed: false,
    remaining: 0,
    resetSeconds: Math.max(Math.ceil((f.resetAtMs - nowMs) / 1000), 1),
    retryAfterMs: Math.max(retryAtMs - nowMs, 1),
    periodEndMs: f.periodEndMs,
  };
}
