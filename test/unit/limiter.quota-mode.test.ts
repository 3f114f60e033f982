// quota_mode and the global modes on the memory store (the same scenarios run on Redis over gRPC in
// test/integration/quota-mode.test.ts), plus the points only visible in process: Decision.shadowed,
// the wire answer of a shadowed refusal, Retry-After and failure policies in quota mode.
import { describe, expect, it } from "vitest";
import { explain } from "../../src/inspect/explain.js";
import { Limiter, type LimiterOptions } from "../../src/limiter/limiter.js";
import { toWireResponse } from "../../src/server/grpc/wire-response.js";
import type { RateLimitRequest } from "../../src/limiter/types.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { MemoryStore } from "../../src/store/memory.js";
import { StoreUnavailableError, type Check, type CheckResult } from "../../src/store/store.js";
import { RuleCounters } from "../../src/telemetry/rule-counters.js";
import { answerOf, QUOTA_MODE_DOMAIN, QUOTA_MODE_RULES, QUOTA_MODE_SCENARIOS, QUOTA_MODE_TIME_US } from "../helpers/quota-mode.js";

const rules = loadRuleFiles([{ name: "qm.yaml", text: QUOTA_MODE_RULES }], { mergeDomains: false }).rules!;

function request(send: ([string, string] | [string, string, number])[]): RateLimitRequest {
  return {
    domain: QUOTA_MODE_DOMAIN,
    hitsAddend: 0,
    descriptors: send.map(([key, value, hits]) => (hits === undefined ? { entries: [{ key, value }] } : { entries: [{ key, value }], hits })),
  };
}

function setup(options: LimiterOptions = {}, store?: MemoryStore) {
  const clock = new ManualClock(QUOTA_MODE_TIME_US);
  const limiter = new Limiter(rules, store ?? new MemoryStore({ clock }), { clock, ...options });
  const counters = new RuleCounters();
  let shadowed = 0;
  const call = async (...send: ([string, string] | [string, string, number])[]) => {
    const req = request(send);
    const d = await limiter.shouldRateLimit(req);
    counters.observe(req, d);
    if (d.shadowed) shadowed++;
    return d;
  };
  const counts = (rule: string) => [...counters.all()].find((c) => c.rule === rule);
  return { clock, call, counts, shadowed: () => shadowed };
}

describe("quota_mode and the global modes on the memory store", () => {
  for (const s of QUOTA_MODE_SCENARIOS) {
    it(s.name, async () => {
      const { call, counts, shadowed } = setup(s.options);
      for (const [i, step] of s.steps.entries()) {
        const d = await call(...step.send);
        expect(answerOf(toWireResponse(d)), `step ${i + 1}`).toEqual(step.expect);
      }
      for (const [rule, expected] of Object.entries(s.counters)) expect(counts(rule), rule).toMatchObject(expected);
      expect(shadowed()).toBe(s.shadowed);
    });
  }
});

describe("quota_mode details", () => {
  it("a shadowed refusal is a plain OK on the wire: statuses kept, no Retry-After, no body", async () => {
    const { call } = setup({ globalShadowMode: true });
    await call(["service", "service_1"]);
    const d = await call(["service", "service_1"]);
    expect([d.code, d.shadowed, d.retryAfterSeconds]).toEqual(["OK", true, undefined]);
    expect(toWireResponse(d)).toEqual({
      overall_code: 1,
      statuses: [{ code: 2, current_limit: { name: "", requests_per_unit: 1, unit: 2 }, limit_remaining: 0, duration_until_reset: { seconds: 50, nanos: 0 } }],
    });
    // Not refused: no mark.
    const fresh = await call(["user", "x"]);
    expect([fresh.code, fresh.shadowed]).toEqual(["OK", undefined]);
  });

  it("an OVER_LIMIT status in a request that passes carries its own reset and the request no Retry-After", async () => {
    const { clock, call } = setup();
    await call(["slow", "y"], ["service", "service_2"]);
    clock.advance(5000);
    const d = await call(["slow", "y"], ["service", "service_2"]);
    expect(d.code).toBe("OK");
    expect(d.retryAfterSeconds).toBeUndefined();
    expect(d.statuses.map((s) => [s.code, s.remaining, s.resetSeconds])).toEqual([
      ["OVER_LIMIT", 0, 3585],
      ["OK", 0, 45],
    ]);
  });

  it("when every quota-mode descriptor and an ordinary one refuse, Retry-After waits for the ordinary one and the first quota-mode one", async () => {
    const { call } = setup();
    for (let i = 0; i < 3; i++) await call(["user", "z"]);
    await call(["slow", "z"], ["service", "service_1"]);
    // user frees in 50 s; the quota-mode pair when service_1 frees (50 s), not slow (3590 s).
    expect((await call(["user", "z"], ["slow", "z"], ["service", "service_1"])).retryAfterSeconds).toBe(50);
    // slow alone is the quota-mode part: 3590 s, the later of the two.
    expect((await call(["user", "z"], ["slow", "z"])).retryAfterSeconds).toBe(3590);
  });

  it("a repeated quota-mode descriptor (Envoy sends one twice) is two quota-mode descriptors, as in the reference", async () => {
    const { call } = setup();
    // The first copy takes the last hit, the second is over: not every copy is over, so OK.
    expect(answerOf(toWireResponse(await call(["service", "service_1"], ["service", "service_1"])))).toEqual({
      code: "OK",
      statuses: [
        ["OK", 0],
        ["OVER_LIMIT", 0],
      ],
    });
    expect(answerOf(toWireResponse(await call(["service", "service_1"], ["service", "service_1"])))).toEqual({
      code: "OVER_LIMIT",
      statuses: [
        ["OVER_LIMIT", 0],
        ["OVER_LIMIT", 0],
      ],
      retryAfter: 50,
    });
  });

  it("a store failure: a quota-mode limit with failure_mode deny is over, and refuses only with every other quota-mode descriptor", async () => {
    const text = `
domain: fp
descriptors:
  - key: a
    quota_mode: true
    failure_mode: deny
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: b
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
`;
    const fpRules = loadRuleFiles([{ name: "fp.yaml", text }], { mergeDomains: false }).rules!;
    class DownStore extends MemoryStore {
      override async apply(_g: number, _c: Check[]): Promise<CheckResult[]> {
        throw new StoreUnavailableError("down");
      }
    }
    const limiter = new Limiter(fpRules, new DownStore(), {});
    const req = (...keys: string[]): RateLimitRequest => ({
      domain: "fp",
      hitsAddend: 0,
      descriptors: keys.map((key) => ({ entries: [{ key, value: "1" }] })),
    });
    const both = await limiter.shouldRateLimit(req("a", "b"));
    expect([both.code, both.statuses.map((s) => s.code), both.outcomes.map((o) => o.via)]).toEqual([
      "OK",
      ["OVER_LIMIT", "OK"],
      ["policy_deny", "policy_allow"],
    ]);
    const alone = await limiter.shouldRateLimit(req("a"));
    expect([alone.code, alone.retryAfterSeconds]).toEqual(["OVER_LIMIT", 1]);
  });

  it("global quota mode: a descriptor whose limits are all replaced is a quota-mode descriptor that is never over, as in the reference", async () => {
    const text = `
domain: rp
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1, name: base}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 1, replaces: [{name: base}]}
`;
    const rpRules = loadRuleFiles([{ name: "rp.yaml", text }], { mergeDomains: false }).rules!;
    const clock = new ManualClock(QUOTA_MODE_TIME_US);
    const limiter = new Limiter(rpRules, new MemoryStore({ clock }), { clock, globalQuotaMode: true });
    const req: RateLimitRequest = {
      domain: "rp",
      hitsAddend: 0,
      descriptors: [{ entries: [{ key: "a", value: "1" }] }, { entries: [{ key: "b", value: "1" }] }],
    };
    expect((await limiter.shouldRateLimit(req)).code).toBe("OK");
    // b is over; a is replaced (not checked) yet still a quota-mode descriptor that is never over.
    const d = await limiter.shouldRateLimit(req);
    expect([d.code, d.statuses.map((s) => s.code)]).toEqual(["OK", ["OK", "OVER_LIMIT"]]);
  });
});

describe("sluice explain", () => {
  it("shows quota_mode on a limit, next to shadow_mode", () => {
    const out = explain(rules, QUOTA_MODE_DOMAIN, [[{ key: "soft", value: "s" }], [{ key: "user", value: "u" }]], QUOTA_MODE_TIME_US / 1000);
    expect(out.split("\n").filter((l) => l.startsWith("    rate_limit: "))).toEqual([
      "    rate_limit: 1 per minute, fixed_window, failure_mode allow, shadow_mode (counted, never refuses), " +
        "quota_mode (refuses the request only when every quota_mode descriptor of it is over) (qm.yaml:16)",
      "    rate_limit: 3 per minute, fixed_window, failure_mode allow (qm.yaml:20)",
    ]);
  });
});
