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
