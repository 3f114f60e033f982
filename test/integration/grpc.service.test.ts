// ShouldRateLimit over real gRPC against a real `sluice serve` (memory store): the answers Envoy gets.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, retryAfter, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";

const RULES = `
domain: test
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3, name: per_user}
  - key: bucket
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: token_bucket}
  - key: free
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: k
    descriptors:
      - key: x
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: old
    rate_limit: {unit: hour, requests_per_unit: 1, name: old_limit}
  - key: new
    rate_limit: {unit: hour, requests_per_unit: 10, name: new_limit, replaces: [{name: old_limit}]}
  - key: meta
    metadata: {team: payments}
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: long
    rate_limit: {unit: hour, requests_per_unit: 1}
`;

let sluice: SluiceProcess;
let client: RlsClient;

beforeAll(async () => {
  sluice = await startSluice(["--config", ruleDir({ "rules.yaml": RULES })]);
  client = rlsClient(sluice.port);
});
afterAll(async () => {
  client?.close();
  expect(await sluice?.stop()).toBe(0);
});

const call = (descriptors: ReturnType<typeof descriptor>[], extra: { hits_addend?: number; domain?: string } = {}) =>
  client.shouldRateLimit({ domain: extra.domain ?? "test", descriptors, hits_addend: extra.hits_addend });

describe("answers", () => {
  it("counts a fixed window and refuses the fourth with Retry-After", async () => {
    const codes: number[] = [];
    const remaining: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await call([descriptor({ user: "alice" })]);
      codes.push(r.overall_code);
      remaining.push(r.statuses[0].limit_remaining ?? 0);
    }
    expect(codes).toEqual([OK, OK, OK, OVER_LIMIT]);
    expect(remaining).toEqual([2, 1, 0, 0]);
    const last = await call([descriptor({ user: "alice" })]);
    expect(last.statuses[0].current_limit).toEqual({ name: "per_user", requests_per_unit: 3, unit: 3 });
    const reset = last.statuses[0].duration_until_reset?.seconds ?? 0;
    expect(reset).toBeGreaterThanOrEqual(1);
    expect(reset).toBeLessThanOrEqual(3600);
    expect(Number(retryAfter(last))).toBe(reset);
    expect(last.response_headers_to_add).toContainEqual({ key: "content-type", value: "application/json" });
    expect(JSON.parse(Buffer.from(last.raw_body!).toString())).toEqual({ error: "rate_limited", retry_after_seconds: reset });
  });

  it("token bucket: current_limit is the refill rate, reset is the time to full", async () => {
    const r = await call([descriptor({ bucket: "b1" })]);
    expect(r.overall_code).toBe(OK);
    expect(r.statuses[0].current_limit).toEqual({ name: "", requests_per_unit: 3, unit: 3 });
    expect(r.statuses[0].limit_remaining).toBe(2);
    expect(r.statuses[0].duration_until_reset?.seconds).toBe(1200);
  });

  it("one status per descriptor, in request order; unmatched and unknown get no current_limit", async () => {
    const r = await call([descriptor({ nothing: "here" }), descriptor({ user: "bob" }), descriptor({ free: "x" })]);
    expect(r.overall_code).toBe(OK);
    expect(r.statuses.length).toBe(3);
    expect(r.statuses[0].current_limit).toBeUndefined();
    expect(r.statuses[0].duration_until_reset).toBeUndefined();
    expect(r.statuses[1].limit_remaining).toBe(2);
    expect(r.statuses[2].current_limit).toBeUndefined();
    expect(r.statuses[2].limit_remaining).toBe(4294967295);

    const unknown = await call([descriptor({ user: "bob" })], { domain: "nope" });
    expect(unknown.overall_code).toBe(OK);
    expect(unknown.statuses[0].current_limit).toBeUndefined();
  });

  it("requests_per_unit 0 blocks without Retry-After", async () => {
    const r = await call([descriptor({ blocked: "x" })]);
    expect(r.overall_code).toBe(OVER_LIMIT);
    expect(retryAfter(r)).toBeUndefined();
    expect(JSON.parse(Buffer.from(r.raw_body!).toString())).toEqual({ error: "rate_limited" });
    // All or nothing: the other limits of the blocked request are not consumed.
    const both = await call([descriptor({ user: "zed" }), descriptor({ blocked: "x" })]);
    expect(both.overall_code).toBe(OVER_LIMIT);
    expect((await call([descriptor({ user: "zed" })])).statuses[0].limit_remaining).toBe(2);
  });

  it("hits_addend: request 0 means 1, the descriptor's own wins, 0 there checks without consuming", async () => {
    const r1 = await call([descriptor({ user: "carol" })], { hits_addend: 0 });
    expect(r1.statuses[0].limit_remaining).toBe(2);
    const r2 = await call([descriptor({ user: "carol" }, { hits_addend: { value: 2 } })], { hits_addend: 5 });
    expect(r2.overall_code).toBe(OK);
    expect(r2.statuses[0].limit_remaining).toBe(0);
    // At the limit: a check-only call is OVER_LIMIT (one more hit would be refused) and consumes nothing.
    const check = await call([descriptor({ user: "carol" }, { hits_addend: { value: 0 } })]);
    expect(check.overall_code).toBe(OVER_LIMIT);
    const dave = await call([descriptor({ user: "dave" }, { hits_addend: { value: 0 } })]);
    expect(dave.overall_code).toBe(OK);
    expect(dave.statuses[0].limit_remaining).toBe(3);
  });

  it("a cost larger than the capacity never passes and has no Retry-After", async () => {
    const r = await call([descriptor({ user: "erin" }, { hits_addend: { value: 4 } })]);
    expect(r.overall_code).toBe(OVER_LIMIT);
    expect(retryAfter(r)).toBeUndefined();
    expect(r.statuses[0].limit_remaining).toBe(0); // a refusal leaves nothing for this request, as the reference reports
  });

  it("all or nothing: a request refused by one limit consumes nothing from the others", async () => {
    await call([descriptor({ user: "frank" }, { hits_addend: { value: 3 } })]);
    const r = await call([descriptor({ bucket: "frank" }), descriptor({ user: "frank" })]);
    expect(r.overall_code).toBe(OVER_LIMIT);
    expect(r.statuses.map((s) => s.code)).toEqual([OK, OVER_LIMIT]);
    expect(r.statuses[0].limit_remaining).toBe(3);
    const after = await call([descriptor({ bucket: "frank" })]);
    expect(after.statuses[0].limit_remaining).toBe(2);
  });

  it("shadow_mode counts but never refuses", async () => {
    const first = await call([descriptor({ shadow: "s" })]);
    expect(first.overall_code).toBe(OK);
    expect(first.statuses[0].limit_remaining).toBe(0);
    const second = await call([descriptor({ shadow: "s" })]);
    expect(second.overall_code).toBe(OK);
    expect(second.statuses[0].code).toBe(OK);
    expect(second.statuses[0].limit_remaining).toBe(0);
    expect(retryAfter(second)).toBeUndefined();
  });

  it("replaces drops the replaced limit without touching its counter", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await call([descriptor({ old: "o" }), descriptor({ new: "n" })]);
      expect(r.overall_code).toBe(OK);
      expect(r.statuses[0].current_limit).toBeUndefined();
      expect(r.statuses[1].limit_remaining).toBe(9 - i);
    }
    const alone = await call([descriptor({ old: "o" })]);
    expect(alone.overall_code).toBe(OK);
    expect(alone.statuses[0].limit_remaining).toBe(0);
  });

  it("descriptors that the reference would give one key keep separate counters", async () => {
    const a = await call([
      descriptor([
        ["k", "v_x"],
        ["x", "1"],
      ]),
    ]);
    const b = await call([
      descriptor([
        ["k", "v"],
        ["x", "x_1"],
      ]),
    ]);
    expect([a.overall_code, b.overall_code]).toEqual([OK, OK]);
    const again = await call([
      descriptor([
        ["k", "v_x"],
        ["x", "1"],
      ]),
    ]);
    expect(again.overall_code).toBe(OVER_LIMIT);
  });

  it("limit override: honoured for a known domain, counter by unit", async () => {
    const o = { limit: { requests_per_unit: 2, unit: 4 } };
    const r1 = await call([descriptor({ anything: "ov" }, o)]);
    expect(r1.statuses[0].current_limit).toEqual({ name: "", requests_per_unit: 2, unit: 4 });
    expect(r1.statuses[0].limit_remaining).toBe(1);
    const r2 = await call([descriptor({ anything: "ov" }, { limit: { requests_per_unit: 5, unit: 4 } })]);
    expect(r2.statuses[0].limit_remaining).toBe(3);
    const unknownDomain = await call([descriptor({ anything: "ov" }, o)], { domain: "nope" });
    expect(unknownDomain.statuses[0].current_limit).toBeUndefined();
  });

  it("metadata of a matched rule comes back in dynamic_metadata", async () => {
    const r = (await call([descriptor({ user: "gina" }), descriptor({ meta: "m" })])) as any;
    const list = r.dynamic_metadata.fields.descriptors.listValue.values;
    expect(list.length).toBe(1);
    expect(list[0].structValue.fields.index.numberValue).toBe(1);
    expect(list[0].structValue.fields.metadata.structValue.fields.team.stringValue).toBe("payments");
  });

  it("values of 64 KiB work and distinct long values keep distinct counters", async () => {
    const a = "a".repeat(65536);
    const b = "a".repeat(65535) + "b";
    expect((await call([descriptor({ long: a })])).overall_code).toBe(OK);
    expect((await call([descriptor({ long: b })])).overall_code).toBe(OK);
    expect((await call([descriptor({ long: a })])).overall_code).toBe(OVER_LIMIT);
  });

  it("health reports SERVING", async () => {
    expect(await client.health("")).toBe(1);
    expect(await client.health("envoy.service.ratelimit.v3.RateLimitService")).toBe(1);
  });
});

describe("bad input gets INVALID_ARGUMENT with a message, and the server keeps serving", () => {
  const cases: [string, Parameters<RlsClient["shouldRateLimit"]>[0], RegExp][] = [
    ["empty domain", { domain: "", descriptors: [descriptor({ user: "x" })] }, /domain must not be empty/],
    ["no descriptors", { domain: "test", descriptors: [] }, /no descriptors/],
    ["empty key", { domain: "test", descriptors: [descriptor({ "": "x" })] }, /key must not be empty/],
    ["override unit UNKNOWN", { domain: "test", descriptors: [descriptor({ user: "x" }, { limit: { requests_per_unit: 1, unit: 0 } })] }, /unit UNKNOWN/],
    [
      "override unit WEEK (absent from the request enum)",
      { domain: "test", descriptors: [descriptor({ user: "x" }, { limit: { requests_per_unit: 1, unit: 7 } })] },
      /unit 7 is not valid/,
    ],
    ["too many descriptors", { domain: "test", descriptors: Array.from({ length: 65 }, () => descriptor({ user: "x" })) }, /more than the maximum 64/],
  ];
  for (const [name, req, message] of cases) {
    it(name, async () => {
      const err = await client.shouldRateLimit(req).then(
        () => undefined,
        (e) => e,
      );
      expect(err?.code).toBe(3);
      expect(err?.details).toMatch(message);
      const ok = await call([descriptor({ user: `still-serving ${name}` })]);
      expect(ok.overall_code).toBe(OK);
    });
  }
});
