// One key's part of a lease call (leases.ts batches them): what its take asks the store for, and what the
// store's answer leaves in its state (the figures, a new lease, a remembered refusal).
import { algorithm } from "../counters/registry.js";
import type { LeaseEntry, LeaseReply } from "../store/store.js";
import { carryBack, type Take } from "./key-table.js";
import { type Lease, leaseIntervals, newLease, refusalUntilMs, remainingBeforeProbe, renewal, unitsAtEnd, unitsToTake } from "./lease-arithmetic.js";

/**
 * The take's entry: a renewal sized from the demand its lease saw and a bucket's refill (its intervals planned), else the waiting
 * requests' units and a share of the room; a live lease too short for a request ends here, its units going
 * back in the same entry.
 */
export function takeEntry(t: Take, nowMs: number, nowUs: number): LeaseEntry {
  const s = t.state;
  let want: number;
  if (t.renewDemand !== undefined) {
    const fade = ((algorithm(s.check.algorithm).refillPerSecond?.(s.check) ?? 0) * s.intervalMs) / 1000;
    const r = renewal(t.renewDemand, fade, s.storeRemaining + t.back, s.check.capacity);
    want = Math.min(r.want + t.demand, s.check.capacity);
    t.intervals = r.intervals;
  } else {
    want = unitsToTake(s.storeRemaining, s.lease, t.demand, t.need, s.check.capacity);
    const l = s.lease;
    if (l && !l.ended) {
      l.ended = true;
      carryBack(t, unitsAtEnd(l, nowMs, nowUs), l.chargedEndMs);
    }
  }
  return { check: s.check, want, need: t.need, back: t.back, backEndMs: t.backEndMs };
}

/**
 * The store's answer to a take: the key's figures, its new lease when units were taken (returned; the caller
 * ends the one it replaces and schedules the new one's ends), and a refusal, remembered (refused: true when
 * the store could not give what the requests needed).
 */
export function installAnswer(
  t: Take,
  e: LeaseEntry,
  r: LeaseReply["results"][number],
  storeNowUs: number,
  sentUs: number,
  arrivedUs: number,
): { lease: Lease | undefined; refused: boolean } {
  const s = t.state;
  const sentMs = Math.floor(sentUs / 1000);
  const p = r.probe;
  s.answered = true;
  s.storeRemaining = remainingBeforeProbe(p, e.need);
  s.resetAtMs = sentMs + p.resetSeconds * 1000;
  s.periodEndMs = p.periodEndMs;
  let lease: Lease | undefined;
  if (r.taken > 0) {
    const a = algorithm(s.check.algorithm);
    lease = newLease({
      taken: r.taken,
      sentUs,
      arrivedUs,
      intervalMs: s.intervalMs,
      periodEndMs: p.periodEndMs,
      storeNowUs,
      resetsAtEnd: a.resetsAtEnd,
      rate: a.refillPerSecond?.(s.check) ?? 0,
      capacity: s.check.capacity,
      storeRemaining: s.storeRemaining,
      demand: t.demand,
      need: t.need,
      intervals: leaseIntervals(t.intervals, e.want, r.taken, s.storeRemaining),
    });
  }
  let refused = false;
  if (p.allowed) {
    s.refusedNeed = 0;
  } else if (p.retryAfterMs > 0) {
    // Refused (or took what was left): the store refuses more until its Retry-After. Remembered for one
    // lease interval at most: units other instances give back when their leases end are found then.
    refused = r.taken < e.need;
    s.refusedNeed = e.need;
    s.refusedUntilMs = refusalUntilMs(sentMs, p.retryAfterMs, s.intervalMs);
    s.retryAtMs = sentMs + p.retryAfterMs;
  }
  return { lease, refused };
}
