// Per-rule counters on real limiter decisions (memory store, pinned clock): the near-limit threshold
// in whole hits, several hits per request, and the label of detailed_metric values.
import { describe, expect, it } from "vitest";
import { Limiter } from "../../src/limiter/limiter.js";
import type { RateLimitRequest } from "../../src/limiter/types.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ManualClock } from "../../src/store/clock.js";
import { MemoryStore } from "../../src/store/memory.js";
import { descriptorLabel, RuleCounters } from "../../src/telemetry/rule-counters.js";

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

function setup(cap = 100) {
  const rules = loadRuleFiles([{ name: "u.yaml", text: RULES }], { mergeDomains: false }).rules!;
  const clock = new ManualClock(1_800_000_000_000_000); // a minute boundary: every call in one window
  const limiter = new Limiter(rules, new MemoryStore({ clock }), { clock });
  const counters = new RuleCounters(cap);
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
  it("near_limit starts at 80 % of the capacity in whole hits (28 of 35), split within one request", async () => {
    const { send, get } = setup();
    for (let i = 0; i < 26; i++) await send("w35", "a");
    expect(get("u.w35")).toMatchObject({ hits: 26, withinLimit: 26, nearLimit: 0 });
    expect(await send("w35", "a", 4)).toBe("OK"); // 27..30: 28, 29, 30 are near
    expect(get("u.w35")).toMatchObject({ hits: 30, withinLimit: 30, nearLimit: 3 });
    expect(await send("w35", "a", 6)).toBe("OVER_LIMIT");
    expect(get("u.w35")).toMatchObject({ hits: 36, withinLimit: 30, nearLimit: 3, overLimit: 6 });
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
    expect(descriptorLabel([{ key: "k", value: "y".repeat(100) }, { key: "j", value: "" }])).toBe(`k=${"y".repeat(64)}…,j=`);
  });
});
