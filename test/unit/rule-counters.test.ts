// Per-rule counters on real limiter decisions (memory store, pinned clock): the near-limit threshold
// in whole hits, several hits per request, and the label of detailed_metric values.
import { describe, expect, it } from "vitest";
import { Limiter } from "../../src/limiter/limiter.js";
import type { RateLimitRequest } from "../../src/limiter/types.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { MemoryStore } from "../../src/store/memory.js";
import { descriptorLabel, nearThreshold, RuleCounters } from "../../src/telemetry/rule-counters.js";

const RULES = `
domain: u
descriptors:
  - key: w35
    rate_limit: {unit: minute, requests_per_unit: 35}
  - key: w1
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: d
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1000}
`;

function setup(cap = 100, nearLimitRatio?: number) {
  const rules = loadRuleFiles([{ name: "u.yaml", text: RULES }], { mergeDomains: false }).rules!;
  const clock = new ManualClock(1_800_000_000_000_000); // a minute boundary: every call in one window
  const limiter = new Limiter(rules, new MemoryStore({ clock }), { clock });
  const counters = new RuleCounters(cap, false, nearLimitRatio);
  const send = async (key: string, value: string, hits = 1) => {
    const req: RateLimitRequest = { domain: "u", hitsAddend: hits, descriptors: [{ entries: [{ key, value }] }] };
    const d = await limiter.shouldRateLimit(req);
    counters.observe(req, d);
    return d.code;
  };
  const get = (rule: string, descriptor?: string) => [...counters.all()].find((c) => c.rule === rule && c.descriptor === descriptor);
  return { send, get };
}

describe("rule counters", () => {
  it("near_limit counts hits past floor(35 x 0.8) = 28, as the reference, split within one request", async () => {
    const { send, get } = setup();
    for (let i = 0; i < 28; i++) await send("w35", "a");
    expect(get("u.w35")).toMatchObject({ hits: 28, withinLimit: 28, nearLimit: 0 });
    expect(await send("w35", "a", 3)).toBe("OK"); // 29..31: all near
    expect(get("u.w35")).toMatchObject({ hits: 31, withinLimit: 31, nearLimit: 3 });
    expect(await send("w35", "a", 6)).toBe("OVER_LIMIT");
    expect(get("u.w35")).toMatchObject({ hits: 37, withinLimit: 31, nearLimit: 3, overLimit: 6 });
  });

  it("another ratio: floor(35 x 0.5) = 17, one request straddling it counts only its hits past 17", async () => {
    const { send, get } = setup(100, 0.5);
    expect(await send("w35", "a", 15)).toBe("OK");
    expect(await send("w35", "a", 4)).toBe("OK"); // 16..19: 18 and 19
    expect(get("u.w35")).toMatchObject({ hits: 19, withinLimit: 19, nearLimit: 2 });
  });

  it("the threshold in float32 arithmetic, as the reference's Go float32 ratio", () => {
    const t = (capacity: number, ratio: number) => nearThreshold(capacity, Math.fround(ratio));
    expect([t(10, 0.8), t(35, 0.8), t(5, 0.8), t(1, 0.8), t(3, 0.7), t(100, 0.29), t(1000, 1), t(7, 0.01)]).toEqual([8, 28, 4, 0, 2, 29, 1000, 0]);
  });

  it("a capacity of 1: the one allowed hit is near the limit", async () => {
    const { send, get } = setup();
    expect(await send("w1", "a")).toBe("OK");
    expect(get("u.w1")).toMatchObject({ hits: 1, withinLimit: 1, nearLimit: 1 });
  });

  it("detailed_metric values fold into _other_ past the cap, and long values are cut", async () => {
    const { send, get } = setup(1);
    await send("d", "first");
    await send("d", "x".repeat(100));
    await send("d", "first");
    expect(get("u.d", "d=first")).toMatchObject({ hits: 2 });
    expect(get("u.d", "_other_")).toMatchObject({ hits: 1 });
    expect(get("u.d")).toBeUndefined();
    expect(
      descriptorLabel([
        { key: "k", value: "y".repeat(100) },
        { key: "j", value: "" },
      ]),
    ).toBe(`k=${"y".repeat(64)}…,j=`);
  });
});
