// What answers carry besides the decision, on real limiter decisions (memory store, pinned clock): the
// reference's RateLimit-* headers (which status they report, exact values, where they go on the wire)
// and dynamic_metadata in each mode (sluice's rules shape, the reference's shape, off).
import { referenceMetadata } from "../../src/server/reference/reference-metadata.js";
import { describe, expect, it } from "vitest";
import { Limiter, type LimiterOptions } from "../../src/limiter/limiter.js";
import { toStruct, toWireResponse } from "../../src/server/grpc/wire-response.js";
import type { DescriptorRequest, RateLimitRequest } from "../../src/limiter/types.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { MemoryStore } from "../../src/store/memory.js";

const RULES = `
domain: h
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
    metadata: {tier: {name: gold, level: 1}, owner: a}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 100}
    metadata: {tier: {name: silver, zone: eu}, owner: b, region: x}
  - key: free
    rate_limit: {unlimited: true}
    metadata: {free: true}
  - key: q1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: old
    rate_limit: {unit: minute, requests_per_unit: 5, name: old}
    metadata: {replaced: true}
  - key: new
    rate_limit:
      unit: minute
      requests_per_unit: 50
      replaces: [{name: old}]
`;

/** 2027-06-01T00:00:10Z: a minute window has 50 s left, an hour window 3590 s. */
const T0_US = (Date.parse("2027-06-01T00:00:00Z") + 10_000) * 1000;
const NAMES = { limit: "RateLimit-Limit", remaining: "RateLimit-Remaining", reset: "RateLimit-Reset" };

function setup(opts: LimiterOptions = {}) {
  const rules = loadRuleFiles([{ name: "h.yaml", text: RULES }], { mergeDomains: false }).rules!;
  const clock = new ManualClock(T0_US);
  const limiter = new Limiter(rules, new MemoryStore({ clock }), { clock, referenceMetadata, ...opts });
  const send = async (descriptors: (DescriptorRequest | [string, string] | [string, string, number])[], hitsAddend = 0) => {
    const req: RateLimitRequest = {
      domain: "h",
      hitsAddend,
      descriptors: descriptors.map((d) => (Array.isArray(d) ? { entries: [{ key: d[0], value: d[1] }], ...(d[2] === undefined ? {} : { hits: d[2] }) } : d)),
    };
    const decision = await limiter.shouldRateLimit(req);
    return { decision, wire: toWireResponse(decision) };
  };
  return { send, rules };
}

const rl = (limit: number, remaining: number, reset: number, names = NAMES) => [
  { key: names.limit, value: String(limit) },
  { key: names.remaining, value: String(remaining) },
  { key: names.reset, value: String(reset) },
];
const CONTENT_TYPE = { key: "content-type", value: "application/json" };

describe("RateLimit-* headers", () => {
  it("off by default: an OK answer has no headers", async () => {
    const { send } = setup();
    const { wire } = await send([["user", "a"]]);
    expect(wire.response_headers_to_add).toBeUndefined();
  });

  it("an OK answer reports the status with the least left; on a tie the first", async () => {
    const { send } = setup({ responseHeaders: NAMES });
    expect((await send([["user", "a"]])).wire.response_headers_to_add).toEqual(rl(10, 9, 50));
    expect(
      (
        await send([
          ["ip", "1"],
          ["user", "a"],
        ])
      ).wire.response_headers_to_add,
    ).toEqual(rl(10, 8, 50));
    // ip down to 8 left after this call (91 hits), user 7: user; then a tie at 6 and 6 (ip first).
    expect(
      (
        await send([
          ["ip", "2", 91],
          ["user", "a"],
        ])
      ).wire.response_headers_to_add,
    ).toEqual(rl(10, 7, 50));
    expect(
      (
        await send([
          ["ip", "2", 3],
          ["user", "a"],
        ])
      ).wire.response_headers_to_add,
    ).toEqual(rl(100, 6, 3590));
  });

  it("a refusal reports the refusing status, after content-type and Retry-After", async () => {
    const { send } = setup({ responseHeaders: NAMES });
    expect((await send([["user", "b", 10]])).wire.response_headers_to_add).toEqual(rl(10, 0, 50));
    const { wire } = await send([
      ["user", "b"],
      ["ip", "3"],
    ]);
    expect(wire.overall_code).toBe(2);
    expect(wire.response_headers_to_add).toEqual([CONTENT_TYPE, { key: "Retry-After", value: "50" }, ...rl(10, 0, 50)]);
    // The last refusing ordinary descriptor wins, whatever its remaining.
    await send([["ip", "9", 100]]);
    const two = await send([
      ["user", "b"],
      ["ip", "9"],
      ["user", "x"],
    ]);
    expect(two.decision.statuses.map((s) => s.code)).toEqual(["OVER_LIMIT", "OVER_LIMIT", "OK"]);
    expect(two.wire.response_headers_to_add!.slice(2)).toEqual(rl(100, 0, 3590));
  });

  it("a quota-mode refusal does not take the headers from an earlier status with as little left", async () => {
    const { send } = setup({ responseHeaders: NAMES });
    await send([["q1", "x"]]); // q1 used up
    // user ends at 0 left (OK), q1 is over (quota mode), q2 passes: the request passes; user is reported.
    const { decision, wire } = await send([
      ["user", "d", 10],
      ["q1", "x"],
      ["q2", "x"],
    ]);
    expect(decision.statuses.map((s) => [s.code, s.remaining])).toEqual([
      ["OK", 0],
      ["OVER_LIMIT", 0],
      ["OK", 1],
    ]);
    expect(wire.overall_code).toBe(1);
    expect(wire.response_headers_to_add).toEqual(rl(10, 0, 50));
  });

  it("no header without a limit in force: no rule, unlimited, replaced", async () => {
    const { send } = setup({ responseHeaders: NAMES });
    expect(
      (
        await send([
          ["nomatch", "z"],
          ["free", "f"],
        ])
      ).wire.response_headers_to_add,
    ).toBeUndefined();
    expect(
      (
        await send([
          ["old", "o"],
          ["new", "n"],
        ])
      ).wire.response_headers_to_add,
    ).toEqual(rl(50, 49, 50));
  });

  it("global shadow mode: the OK answer carries the headers of the refusing status, and no Retry-After", async () => {
    const { send } = setup({ responseHeaders: { limit: "X-Limit", remaining: "X-Left", reset: "X-Reset" }, globalShadowMode: true });
    await send([["user", "e", 10]]);
    const { decision, wire } = await send([["user", "e"]]);
    expect([decision.shadowed, wire.overall_code]).toEqual([true, 1]);
    expect(wire.response_headers_to_add).toEqual([
      { key: "X-Limit", value: "10" },
      { key: "X-Left", value: "0" },
      { key: "X-Reset", value: "50" },
    ]);
  });
});

describe("dynamic_metadata", () => {
  it("rules (default): the matched rules' metadata by descriptor index, refused or not", async () => {
    const { send } = setup();
    await send([["user", "m", 10]]);
    const { wire } = await send([
      ["user", "m"],
      ["nomatch", "z"],
      ["ip", "1"],
    ]);
    expect(wire.dynamic_metadata).toEqual(
      toStruct({
        descriptors: [
          { index: 0, metadata: { tier: { name: "gold", level: 1 }, owner: "a" } },
          { index: 2, metadata: { tier: { name: "silver", zone: "eu" }, owner: "b", region: "x" } },
        ],
      }),
    );
  });

  it("reference: the request echoed, and the passing descriptors' metadata merged (first value wins, maps merge)", async () => {
    const { send, rules } = setup({ responseMetadata: "reference" });
    const override: DescriptorRequest = { entries: [{ key: "k", value: "v" }], override: { requestsPerUnit: 5, unit: "hour" }, hits: 2 };
    const { decision, wire } = await send([["user", "a"], ["ip", "1"], ["free", "f"], ["nomatch", "z"], ["old", "o"], ["new", "n"], override]);
    expect(decision.metadata).toBeUndefined();
    const expected = {
      domain: "h",
      descriptors: [
        { entries: ["user=a"] },
        { entries: ["ip=1"] },
        { entries: ["free=f"] },
        { entries: ["nomatch=z"] },
        { entries: ["old=o"] },
        { entries: ["new=n"] },
        { entries: ["k=v"], limit: "requests_per_unit:5 unit:HOUR", hitsAddend: 2 },
      ],
      // Not free's (unlimited) nor old's (replaced).
      metadata: { tier: { name: "gold", level: 1, zone: "eu" }, owner: "a", region: "x" },
    };
    expect(decision.dynamicMetadata).toEqual(expected);
    expect(wire.dynamic_metadata).toEqual(toStruct(expected));
    expect(wire.dynamic_metadata!.fields.domain).toEqual({ stringValue: "h" });
    // The rules' own metadata is left as loaded.
    expect(rules.domains.get("h")!.root.keyOnly.get("user")!.metadata).toEqual({ tier: { name: "gold", level: 1 }, owner: "a" });
  });

  it("reference: a refused descriptor's metadata is left out; the request's hits_addend shows when not 0", async () => {
    const { send } = setup({ responseMetadata: "reference" });
    const { decision } = await send(
      [
        ["user", "r", 11],
        ["ip", "1", 0],
        ["new", "n"],
      ],
      3,
    );
    expect(decision.code).toBe("OVER_LIMIT");
    expect(decision.dynamicMetadata).toEqual({
      domain: "h",
      descriptors: [{ entries: ["user=r"], hitsAddend: 11 }, { entries: ["ip=1"], hitsAddend: 0 }, { entries: ["new=n"] }],
      hitsAddend: 3,
      metadata: { tier: { name: "silver", zone: "eu" }, owner: "b", region: "x" },
    });
    // Nothing passed with metadata: no `metadata` key.
    const none = await send([["nomatch", "z"]]);
    expect(none.decision.dynamicMetadata).toEqual({ domain: "h", descriptors: [{ entries: ["nomatch=z"] }] });
  });

  it("off: none", async () => {
    const { send } = setup({ responseMetadata: "off" });
    const { decision, wire } = await send([["user", "a"]]);
    expect([decision.metadata, decision.dynamicMetadata, wire.dynamic_metadata]).toEqual([undefined, undefined, undefined]);
  });
});
