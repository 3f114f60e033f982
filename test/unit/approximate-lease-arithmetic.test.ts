// Approximate limits' lease arithmetic (src/approximate/lease-arithmetic.ts): what a lease has left as
// its bucket refills, how much to take, where a new lease ends, what goes back, and the figures answered.
import { describe, expect, it } from "vitest";
import {
  admits,
  allowedFigures,
  atIntervalEnd,
  demandPerInterval,
  type Lease,
  type LeaseTaken,
  MAX_REFUSAL_MS,
  leaseIntervals,
  newLease,
  refusalUntilMs,
  rememberedRefusal,
  remainingBeforeProbe,
  RENEW_LEAD_MS,
  renewAtMs,
  renewal,
  unitsAtEnd,
  unitsToTake,
  unused,
  worthGivingBack,
} from "../../src/approximate/lease-arithmetic.js";

function lease(over: Partial<Lease>): Lease {
  return {
    units: 10,
    used: 0,
    startUs: 1_000_000,
    endsAtMs: 2_000,
    midMs: 2_000,
    usedAtMid: 0,
    waited: 0,
    chargedEndMs: 0,
    endsWithWindow: false,
    rate: 0,
    slack: 0,
    firm: 0,
    ended: false,
    ...over,
  };
}

describe("approximate lease arithmetic", () => {
  it("a window's lease keeps its unused units whatever the time", () => {
    const l = lease({ units: 10, used: 3 });
    expect(unused(l, 1_000_000)).toBe(7);
    expect(unused(l, 60_000_000)).toBe(7);
    expect(unused({ ...l, ended: true }, 1_000_000)).toBe(0);
    expect(unused(undefined, 1_000_000)).toBe(0);
  });

  it("a bucket's units beyond the firm ones fade at the refill rate once the slack is spent; firm ones never", () => {
    // 10 units, 2 used of 4 firm, refill 2/s, 1 unit of slack.
    const l = lease({ units: 10, used: 2, firm: 4, rate: 2, slack: 1 });
    expect(unused(l, 1_000_000)).toBe(8);
    expect(unused(l, 1_500_000)).toBe(8); // 1 unit of refill: the slack
    expect(unused(l, 2_000_000)).toBe(7);
    expect(unused(l, 3_250_000)).toBe(4.5);
    expect(unused(l, 5_500_000)).toBe(2); // faded to the 2 firm ones left
    expect(unused(l, 60_000_000)).toBe(2);
    // Used beyond the firm ones: none left firm, all fade.
    expect(unused(lease({ units: 10, used: 5, firm: 4, rate: 2, slack: 1 }), 2_000_000)).toBe(4);
    expect(unused(lease({ units: 10, used: 5, firm: 4, rate: 2, slack: 1 }), 9_000_000)).toBe(0);
  });

  it("a lease admits a need up to what it has left, before its end, while live", () => {
    const l = lease({ units: 10, used: 7, endsAtMs: 2_000 });
    expect(admits(l, 3, 1_999, 1_999_000)).toBe(true);
    expect(admits(l, 4, 1_999, 1_999_000)).toBe(false);
    expect(admits(l, 1, 2_000, 2_000_000)).toBe(false);
    expect(admits({ ...l, ended: true }, 1, 1_000, 1_000_000)).toBe(false);
  });

  it("units to take: the waiting requests' demand (at least the need) plus a tenth of the room, up to the capacity", () => {
    expect(unitsToTake(100, undefined, 3, 1, 1000)).toBe(13);
    expect(unitsToTake(100, undefined, 0, 2, 1000)).toBe(12);
    expect(unitsToTake(100, lease({ units: 20, used: 5 }), 3, 1, 1000)).toBe(14); // room 115
    expect(unitsToTake(100, lease({ units: 20, used: 5, ended: true }), 3, 1, 1000)).toBe(13);
    expect(unitsToTake(100, lease({ units: 20, used: 25 }), 3, 1, 1000)).toBe(13); // over-used: no room from it
    expect(unitsToTake(9, undefined, 3, 1, 1000)).toBe(3);
    expect(unitsToTake(100, undefined, 3, 1, 10)).toBe(10);
  });

  it("what the store had left: the probe's remaining, plus the need when the need fitted", () => {
    expect(remainingBeforeProbe({ allowed: true, remaining: 7 }, 3)).toBe(10);
    expect(remainingBeforeProbe({ allowed: false, remaining: 2 }, 3)).toBe(2);
  });

  const bucket: LeaseTaken = {
    taken: 10,
    sentUs: 5_000_500,
    arrivedUs: 5_000_700,
    intervalMs: 1000,
    periodEndMs: 0,
    storeNowUs: 1_700_000_000_000_000,
    resetsAtEnd: false,
    rate: 2,
    capacity: 100,
    storeRemaining: 60,
    demand: 3,
    need: 1,
  };

  it("a bucket's new lease: one interval from its arrival, slack the refill up to full, firm the demand", () => {
    expect(newLease(bucket)).toEqual({
      units: 10,
      used: 0,
      startUs: 5_000_500,
      endsAtMs: 6_000,
      midMs: 6_000,
      usedAtMid: 0,
      waited: 3,
      chargedEndMs: 0,
      endsWithWindow: false,
      rate: 2,
      slack: 29, // 100 - (60 + 1 + 10)
      firm: 3,
      ended: false,
    });
    expect(newLease({ ...bucket, capacity: 10, storeRemaining: 5 }).slack).toBe(0);
    expect(newLease({ ...bucket, taken: 2, demand: 5 }).firm).toBe(2);
    expect(newLease({ ...bucket, taken: 2, demand: 5 }).waited).toBe(2);
    expect(newLease({ ...bucket, demand: 0, need: 4 }).firm).toBe(4);
  });

  it("a window's new lease ends before the window does by the store's clock, measured from the send", () => {
    const storeNowMs = 1_700_000_000_200;
    const fixed: LeaseTaken = { ...bucket, rate: 0, resetsAtEnd: true, storeNowUs: storeNowMs * 1000 + 999 };
    const early = newLease({ ...fixed, periodEndMs: storeNowMs + 400 });
    expect([early.endsAtMs, early.endsWithWindow, early.chargedEndMs]).toEqual([5_400, true, storeNowMs + 400]);
    // A sliding window's units still count after its end: not ended with it.
    expect(newLease({ ...fixed, resetsAtEnd: false, periodEndMs: storeNowMs + 400 }).endsWithWindow).toBe(false);
    // The window ends at the interval's end: with it; after: the interval decides.
    expect([newLease({ ...fixed, periodEndMs: storeNowMs + 1000 }).endsAtMs, newLease({ ...fixed, periodEndMs: storeNowMs + 1000 }).endsWithWindow]).toEqual([
      6_000,
      true,
    ]);
    expect([newLease({ ...fixed, periodEndMs: storeNowMs + 2000 }).endsAtMs, newLease({ ...fixed, periodEndMs: storeNowMs + 2000 }).endsWithWindow]).toEqual([
      6_000,
      false,
    ]);
  });

  it("a lease whose call took longer than an interval lives its interval from its arrival; its window's end still counts from the send", () => {
    const slow = newLease({ ...bucket, arrivedUs: 6_300_000 });
    expect([slow.midMs, slow.endsAtMs, slow.startUs]).toEqual([7_300, 7_300, 5_000_500]);
    expect(admits(slow, 1, 6_300, 6_300_000)).toBe(true);
    const storeNowMs = 1_700_000_000_000;
    const fixed: LeaseTaken = { ...bucket, rate: 0, resetsAtEnd: true, storeNowUs: storeNowMs * 1000, arrivedUs: 6_300_000 };
    const cut = newLease({ ...fixed, periodEndMs: storeNowMs + 1_500 });
    expect([cut.endsAtMs, cut.endsWithWindow]).toEqual([6_500, true]);
  });

  it("a lease in steady use lives two intervals, its first interval's end checked; a window's end still cuts it", () => {
    const two = newLease({ ...bucket, intervals: 2 });
    expect([two.midMs, two.endsAtMs]).toEqual([6_000, 7_000]);
    const storeNowMs = 1_700_000_000_200;
    const fixed: LeaseTaken = { ...bucket, rate: 0, resetsAtEnd: true, storeNowUs: storeNowMs * 1000, intervals: 2 };
    const cut = newLease({ ...fixed, periodEndMs: storeNowMs + 1_500 });
    expect([cut.midMs, cut.endsAtMs, cut.endsWithWindow]).toEqual([6_000, 6_500, true]);
    const early = newLease({ ...fixed, periodEndMs: storeNowMs + 400 });
    expect([early.midMs, early.endsAtMs]).toEqual([5_400, 5_400]);
  });

  it("at an interval's end: the first of two keeps a used lease and ends an unused one; the last renews one used in it", () => {
    const l = lease({ units: 30, midMs: 1_100, endsAtMs: 1_200 });
    expect(atIntervalEnd({ ...l, used: 0 }, false)).toBe("end");
    expect(atIntervalEnd({ ...l, used: 1 }, false)).toBe("keep");
    expect(atIntervalEnd({ ...l, used: 5, usedAtMid: 5 }, true)).toBe("end"); // idle in its last interval
    expect(atIntervalEnd({ ...l, used: 6, usedAtMid: 5 }, true)).toBe("renew");
    expect(atIntervalEnd({ ...l, used: 0 }, true)).toBe("end");
    // One interval: its end is its only check.
    expect(atIntervalEnd(lease({ used: 1 }), true)).toBe("renew");
    // Units given back by refused requests leave it idle.
    expect(atIntervalEnd({ ...l, used: 4, usedAtMid: 5 }, true)).toBe("end");
    // Used only by the requests that waited for it: not renewed; one more use renews it.
    expect(atIntervalEnd(lease({ used: 2, waited: 2 }), true)).toBe("end");
    expect(atIntervalEnd(lease({ used: 3, waited: 2 }), true)).toBe("renew");
  });

  it("the sweep reaches a lease's end 10 ms early (at most a quarter interval); one ending with its window, at its end", () => {
    const l = lease({ midMs: 1_100, endsAtMs: 1_200 });
    expect(RENEW_LEAD_MS).toBe(10);
    expect(renewAtMs(l, 100)).toBe(1_190);
    expect(renewAtMs(l, 20)).toBe(1_195);
    expect(renewAtMs({ ...l, midMs: 1_200 }, 100)).toBe(1_190); // one interval
    expect(renewAtMs({ ...l, endsWithWindow: true }, 100)).toBe(1_200);
  });

  it("demand per interval: units used over the lease's life so far, at least 10 ms of it", () => {
    const l = lease({ used: 14, startUs: 1_000_400 });
    expect(demandPerInterval(l, 1_200, 100)).toBe(7);
    expect(demandPerInterval(l, 1_100, 100)).toBe(14);
    expect(demandPerInterval(l, 1_002, 100)).toBe(140);
    expect(demandPerInterval({ ...l, used: -1 }, 1_200, 100)).toBe(0);
  });

  it("a renewal: two intervals of the demand with its margin while that is at most a tenth of the room, else one interval's within it", () => {
    // 7 a interval: 2 x 7 x 1.5 = 21 units, room 5,000.
    expect(renewal(7, 0, 5_000, 5_000)).toEqual({ want: 21, intervals: 2 });
    expect(renewal(6.7, 0, 5_000, 5_000)).toEqual({ want: 21, intervals: 2 }); // 20.1 up
    expect(renewal(7, 0, 210, 5_000)).toEqual({ want: 21, intervals: 2 });
    // Near the limit: one interval, 7 x 1.5 = 10.5 -> 11, at most a tenth of the room, at least 1.
    expect(renewal(7, 0, 209, 5_000)).toEqual({ want: 11, intervals: 1 });
    expect(renewal(7, 0, 50, 5_000)).toEqual({ want: 5, intervals: 1 });
    expect(renewal(7, 0, 9, 5_000)).toEqual({ want: 1, intervals: 1 });
    expect(renewal(7, 0, 0, 5_000)).toEqual({ want: 1, intervals: 1 });
    // Never over the capacity.
    expect(renewal(100, 0, 100_000, 20)).toEqual({ want: 20, intervals: 1 });
    expect(renewal(0.01, 0, 5_000, 5_000)).toEqual({ want: 1, intervals: 2 });
  });

  it("a bucket's renewal adds the refill of its life: its units fade by that while the bucket is full", () => {
    // 5,000 a minute refills 8.33 per 100 ms: 2 x (7 x 1.5 + 8.33) = 37.67 -> 38.
    expect(renewal(7, 5_000 / 600, 4_000, 5_000)).toEqual({ want: 38, intervals: 2 });
    // Near the limit: one interval, 18.83 -> 19, at most a tenth of the room.
    expect(renewal(7, 5_000 / 600, 300, 5_000)).toEqual({ want: 19, intervals: 1 });
    expect(renewal(7, 5_000 / 600, 100, 5_000)).toEqual({ want: 10, intervals: 1 });
  });

  it("a taken lease lives the planned intervals only when all was given and it is at most a tenth of what the store had", () => {
    expect(leaseIntervals(2, 21, 21, 4_000)).toBe(2);
    expect(leaseIntervals(2, 21, 21, 189)).toBe(2); // 21 of 210
    expect(leaseIntervals(2, 21, 21, 188)).toBe(1);
    expect(leaseIntervals(2, 21, 20, 4_000)).toBe(1);
    expect(leaseIntervals(1, 21, 21, 4_000)).toBe(1);
  });

  it("at its end a lease gives back what it has left, unless its window reset whole", () => {
    const fixed = lease({ units: 10, used: 4, endsAtMs: 2_000, endsWithWindow: true });
    expect(unitsAtEnd(fixed, 1_999, 1_999_000)).toBe(6);
    expect(unitsAtEnd(fixed, 2_000, 2_000_000)).toBe(0);
    expect(worthGivingBack(fixed, 2_000)).toBe(false);
    expect(worthGivingBack({ ...fixed, endsWithWindow: false }, 2_000)).toBe(true);
    expect(unitsAtEnd({ ...fixed, endsWithWindow: false }, 5_000, 5_000_000)).toBe(6);
    expect(unitsAtEnd(lease({ units: 10, used: 10 }), 1_000, 1_000_000)).toBe(0);
    // A bucket's faded units are not given back.
    expect(unitsAtEnd(lease({ units: 10, used: 0, rate: 2, slack: 0 }), 1_500, 3_000_000)).toBe(6);
    expect(unitsAtEnd(lease({ units: 10, used: 0, rate: 2, slack: 0 }), 1_500, 7_000_000)).toBe(0);
  });

  it("a refusal is remembered until its Retry-After, at most one interval and MAX_REFUSAL_MS", () => {
    expect(refusalUntilMs(1_000, 500, 2_000)).toBe(1_500);
    expect(refusalUntilMs(1_000, 5_000, 2_000)).toBe(3_000);
    expect(refusalUntilMs(1_000, 120_000, 300_000)).toBe(1_000 + MAX_REFUSAL_MS);
    expect(MAX_REFUSAL_MS).toBe(60_000);
  });

  it("figures: the store's remaining plus the lease's, floored and capped; reset from the last answer", () => {
    const f = { storeRemaining: 5, resetAtMs: 10_500, periodEndMs: 77, answered: true };
    expect(allowedFigures(f, 2.7, 100, 9_000)).toEqual({ allowed: true, remaining: 7, resetSeconds: 2, retryAfterMs: -1, periodEndMs: 77 });
    expect(allowedFigures(f, 200, 100, 9_000).remaining).toBe(100);
    expect(allowedFigures(f, 0, 100, 11_000).resetSeconds).toBe(0);
    expect(allowedFigures({ ...f, answered: false }, 0, 100, 9_000).resetSeconds).toBe(0);
  });

  it("a remembered refusal: nothing left, reset and retry at least 1", () => {
    const f = { storeRemaining: 0, resetAtMs: 10_500, periodEndMs: 77, answered: true };
    expect(rememberedRefusal(f, 9_250, 9_000)).toEqual({ allowed: false, remaining: 0, resetSeconds: 2, retryAfterMs: 250, periodEndMs: 77 });
    expect(rememberedRefusal({ ...f, resetAtMs: 8_000 }, 8_000, 9_000)).toEqual({
      allowed: false,
      remaining: 0,
      resetSeconds: 1,
      retryAfterMs: 1,
      periodEndMs: 77,
    });
  });
});
