import { describe, expect, it } from "vitest";
import { SpaceSaving } from "../../src/insight/space-saving.js";

const sorted = (e: [string, number][]) => [...e].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));

describe("SpaceSaving", () => {
  it("counts exactly while it has room", () => {
    const s = new SpaceSaving(4);
    for (const k of ["a", "b", "a", "c", "a", "b"]) s.add(k);
    expect(sorted(s.entries())).toEqual([
      ["a", 3],
      ["b", 2],
      ["c", 1],
    ]);
    expect(sorted(s.entries(true))).toEqual(sorted(s.entries()));
  });

  it("keeps a heavy hitter exact among many light keys, and bounds every count", () => {
    const s = new SpaceSaving(8);
    const truth = new Map<string, number>();
    const add = (k: string) => {
      s.add(k);
      truth.set(k, (truth.get(k) ?? 0) + 1);
    };
    for (let i = 0; i < 5000; i++) {
      add("attacker");
      add(`c${i}`);
      if (i % 2 === 0) add(`c${i}`);
    }
    expect(s.size).toBe(8);
    const upper = new Map(s.entries());
    const lower = new Map(s.entries(true));
    expect(upper.get("attacker")).toBe(5000);
    expect(lower.get("attacker")).toBe(5000);
    for (const [k, n] of upper) expect(n).toBeGreaterThanOrEqual(truth.get(k)!);
    for (const [k, n] of lower) expect(n).toBeLessThanOrEqual(truth.get(k)!);
  });

  it("adds a weight: exact while it has room, in the order of the counts", () => {
    const s = new SpaceSaving(4);
    s.add("a", 5);
    s.add("b", 2);
    s.add("a");
    s.add("c", 3);
    s.add("b", 4);
    expect(s.dump()).toEqual([
      ["c", 3, 0],
      ["a", 6, 0],
      ["b", 6, 0],
    ]);
  });

  it("a weighted newcomer takes over a least counter: its count that one's plus the weight, its error that one's count", () => {
    const s = new SpaceSaving(2);
    s.add("a", 5);
    s.add("b", 3);
    s.add("c", 2);
    expect(s.dump()).toEqual([
      ["a", 5, 0],
      ["c", 5, 3],
    ]);
    expect(sorted(s.entries())).toEqual([
      ["a", 5],
      ["c", 5],
    ]);
    // The lower bound: c was counted 2 for sure.
    expect(sorted(s.entries(true))).toEqual([
      ["a", 5],
      ["c", 2],
    ]);
    // The bound holds: every count sums to what was added, so the least is at most 10 / 2.
    s.add("d", 7);
    expect(s.dump()).toEqual([
      ["c", 5, 3],
      ["d", 12, 5],
    ]);
  });

  it("adding w at once leaves the summary exactly as w adds of one", () => {
    // A fixed pseudo-random sequence (LCG): keys of a skewed spread, weights 1 to 40, a summary of 8.
    let seed = 12345;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const weighted = new SpaceSaving(8);
    const single = new SpaceSaving(8);
    let total = 0;
    for (let step = 0; step < 3000; step++) {
      const key = `k${next(next(40) + 1)}`;
      const w = next(40) + 1;
      weighted.add(key, w);
      for (let i = 0; i < w; i++) single.add(key);
      total += w;
      expect(weighted.dump()).toEqual(single.dump());
    }
    expect(weighted.size).toBe(8);
    // Space-Saving's invariant: the counts sum to everything added.
    expect(weighted.entries().reduce((n, e) => n + e[1], 0)).toBe(total);
  });

  it("refuses a weight that is not a whole number of at least 1", () => {
    const s = new SpaceSaving(2);
    for (const w of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => s.add("a", w)).toThrow(`SpaceSaving adds a whole number of at least 1, got ${w}`);
    }
    expect(s.size).toBe(0);
  });

  it("starts again after clear", () => {
    const s = new SpaceSaving(2);
    for (const k of ["a", "b", "c", "c"]) s.add(k);
    s.clear();
    expect(s.size).toBe(0);
    s.add("d");
    expect(s.entries()).toEqual([["d", 1]]);
  });

  it("refuses a capacity below 1", () => {
    expect(() => new SpaceSaving(0)).toThrow("SpaceSaving needs a capacity of at least 1");
  });
});
