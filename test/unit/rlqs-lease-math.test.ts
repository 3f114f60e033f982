// RLQS assignments' arithmetic (src/rlqs/lease-math.ts) and one bucket's ledger (src/rlqs/bucket-state.ts): what a
// lease charges, when it is a burst, how long it may live, and when its unused units may go back.
import { describe, expect, it } from "vitest";
import { BucketState, SETTLE_MS } from "../../src/rlqs/bucket-state.js";
import { burstUnits, freshWant, isBurst, rateBudget, rateFor, spareUnits, targetRate, ttlSeconds } from "../../src/rlqs/lease-math.js";

describe("lease-math", () => {
  it("a rate lease's budget: a full bucket plus its refill over its life and the 0.25 s slack", () => {
    expect(rateBudget(10, 2000)).toBe(33); // 10 * 3.25 = 32.5
    expect(rateBudget(125, 2000)).toBe(407);
    expect(rateBudget(1, 0)).toBe(2);
    expect(rateFor(33, 2)).toBe(10);
    expect(rateFor(32, 2)).toBe(9);
  });

  it("the rate asked for: the demand with 25 % headroom, at least 1", () => {
    expect(targetRate(0)).toBe(1);
    expect(targetRate(8)).toBe(10);
    expect(targetRate(100)).toBe(125);
  });

  it("a fresh lease: the rate's budget where it fits in half of what is left, else a burst of the demand over its life", () => {
    expect(freshWant(10, 8, 2, 600)).toBe(33);
    expect(freshWant(10, 8, 2, 66)).toBe(33);
    expect(freshWant(10, 8, 2, 65)).toBe(16); // 33 > 32: a burst of 8 a second for 2 s
    expect(freshWant(125, 100, 2, 600)).toBe(200);
    expect(freshWant(10, -1, 2, 40)).toBe(20); // demand not known yet: the rate stands for it
    expect(freshWant(10, 0, 2, 0)).toBe(1);
    expect(burstUnits(0.1, 2)).toBe(1);
    expect(isBurst(200, 125, 2)).toBe(true);
    expect(isBurst(407, 125, 2)).toBe(false);
  });

  it("a lease's life: whole seconds up to the cap, ending with its slack before the window does", () => {
    expect(ttlSeconds(0, 2, 0)).toBe(2);
    expect(ttlSeconds(0, 5, 60_000)).toBe(5);
    expect(ttlSeconds(0, 2, 1500)).toBe(1);
    expect(ttlSeconds(0, 2, 1249)).toBe(0);
    expect(ttlSeconds(58_000, 2, 60_000)).toBe(1);
  });

  it("units that can go back: charged less reported admitted less live budgets, never negative", () => {
    expect(spareUnits(100, 30, 50)).toBe(20);
    expect(spareUnits(10, 30, 0)).toBe(0);
    expect(spareUnits(100, 0, 100)).toBe(0);
  });
});

describe("a bucket's ledger", () => {
  const entries = [{ key: "name", value: "api" }];

  it("demand: requests a second over a span of at least the minimum", () => {
    const b = new BucketState(entries, "api", 0);
    b.count(10, 0, 400);
    expect(b.demand).toBe(-1);
    b.count(40, 5000, 400);
    expect(b.demand).toBe(10);
    b.count(0, 5100, 400);
    expect(b.demand).toBe(10);
    expect(b.activeAtMs).toBe(5000);
  });

  it("a lease settles on the first report after it surely stopped admitting; retiring it brings that forward", () => {
    const b = new BucketState(entries, "api", 0);
    b.resetWindow(1, 600);
    expect(b.storeRemaining).toBe(600);
    const live = { budget: 50, settleAfterMs: 10_000 + SETTLE_MS };
    b.lease = {
      spec: { maxTokens: 10, tokensPerFill: 10, fillSeconds: 1, fillNanos: 1 },
      rate: 10,
      asked: 10,
      startMs: 0,
      endMs: 10_000,
      live,
    };
    b.live.push(live);
    b.charged[0] = 80;
    b.reported(20, 5000);
    expect(b.liveBudgets()).toBe(50);
    b.retire(6000);
    expect(b.lease).toBeUndefined();
    expect(live.settleAfterMs).toBe(6000 + SETTLE_MS);
    b.reported(5, 6000 + SETTLE_MS); // not after: Envoy may still be admitting under it
    expect(b.liveBudgets()).toBe(50);
    b.reported(7, 6000 + SETTLE_MS + 1);
    expect(b.liveBudgets()).toBe(0);
    expect(b.allowed).toBe(32);
    expect(spareUnits(b.charged[0], b.allowed, b.liveBudgets())).toBe(48);
    b.resetWindow(1, 600);
    expect([b.charged, b.allowed, b.live.length]).toEqual([[0], 0, 0]);
  });
});
