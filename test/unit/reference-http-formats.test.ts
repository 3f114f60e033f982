// The reference's HTTP surface, piece by piece: protobuf JSON both ways, the /rlconfig text and the
// /healthcheck rules.
import { describe, expect, it } from "vitest";
import { rlconfigText } from "../../src/inspect/rlconfig-text.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ReferenceHealth } from "../../src/server/reference/http-health.js";
import { fromProtoJson, jsonName, ProtoJsonError, rlsJsonTypes, toProtoJson } from "../../src/server/reference/http-protojson.js";
import type { NodeStatus } from "../../src/store/store.js";

const { request, response } = rlsJsonTypes();

describe("protobuf JSON -> RateLimitRequest", () => {
  it("JSON names and proto names, numbers as strings, wrappers as bare values, enums by name or number", () => {
    const camel = fromProtoJson(request, {
      domain: "edge",
      hitsAddend: "3",
      descriptors: [
        { entries: [{ key: "k", value: "v" }], hitsAddend: 0 },
        { entries: [{ key: "a" }], limit: { requestsPerUnit: 5, unit: "MINUTE" } },
        { entries: [], limit: { requests_per_unit: "7", unit: 3 }, hits_addend: "9" },
      ],
    });
    expect(camel).toEqual({
      domain: "edge",
      hits_addend: 3,
      descriptors: [
        { entries: [{ key: "k", value: "v" }], hits_addend: { value: 0 } },
        { entries: [{ key: "a" }], limit: { requests_per_unit: 5, unit: 2 } },
        { entries: [], limit: { requests_per_unit: 7, unit: 3 }, hits_addend: { value: 9 } },
      ],
    });
    expect(fromProtoJson(request, { domain: "d", hits_addend: null, descriptors: null })).toEqual({ domain: "d" });
  });

  it("what protojson refuses, with where", () => {
    const bad = (json: unknown) => {
      try {
        fromProtoJson(request, json);
      } catch (err) {
        expect(err).toBeInstanceOf(ProtoJsonError);
        return (err as Error).message;
      }
      return "accepted";
    };
    expect([
      bad([]),
      bad({ domain: 5 }),
      bad({ domian: "d" }),
      bad({ domain: "d", descriptors: {} }),
      bad({ hitsAddend: -1 }),
      bad({ hitsAddend: 1.5 }),
      bad({ hitsAddend: "4294967296" }),
      bad({ descriptors: [{ entries: [{ key: "k", value: 1 }] }] }),
      bad({ descriptors: [{ limit: { unit: "FORTNIGHT" } }] }),
      bad({ descriptors: [{ hitsAddend: "x" }] }),
      bad({ domain: "a", Domain: "b" }),
      bad({ hitsAddend: 1, hits_addend: 2 }),
    ]).toEqual([
      "the body must be a JSON object",
      "domain must be a string",
      "unknown field domian (RateLimitRequest has domain, descriptors, hitsAddend)",
      "descriptors must be a JSON array",
      "hitsAddend must be an integer from 0 to 4294967295 (a number or a string)",
      "hitsAddend must be an integer from 0 to 4294967295 (a number or a string)",
      "hitsAddend must be an integer from 0 to 4294967295 (a number or a string)",
      "descriptors[0].entries[0].value must be a string",
      "descriptors[0].limit.unit: 'FORTNIGHT' is not one of UNKNOWN, SECOND, MINUTE, HOUR, DAY, MONTH, YEAR",
      `descriptors[0].hitsAddend must be an integer from 0 to ${Number.MAX_SAFE_INTEGER} (a number or a string)`,
      "unknown field Domain (RateLimitRequest has domain, descriptors, hitsAddend)",
      "field hits_addend is given twice (by its JSON and its proto name)",
    ]);
    expect(jsonName("requests_per_unit")).toBe("requestsPerUnit");
  });
});

describe("RateLimitResponse -> protobuf JSON", () => {
  it("JSON names, enum names, durations as strings, defaults left out, bytes in base64, Struct as JSON", () => {
    const json = toProtoJson(response, {
      overall_code: 2,
      statuses: [
        { code: 2, current_limit: { name: "", requests_per_unit: 10, unit: 2 }, limit_remaining: 0, duration_until_reset: { seconds: 42, nanos: 0 } },
        { code: 1, limit_remaining: 4294967295 },
        {
          code: 1,
          current_limit: { name: "per-day", requests_per_unit: 5, unit: 4 },
          limit_remaining: 3,
          duration_until_reset: { seconds: 1, nanos: 500_000_000 },
        },
      ],
      response_headers_to_add: [{ key: "Retry-After", value: "42" }],
      raw_body: Buffer.from('{"error":"rate_limited"}'),
      dynamic_metadata: {
        fields: {
          descriptors: { listValue: { values: [{ structValue: { fields: { index: { numberValue: 0 }, ok: { boolValue: true }, none: { nullValue: 0 } } } }] } },
        },
      },
    });
    expect(json).toEqual({
      overallCode: "OVER_LIMIT",
      statuses: [
        { code: "OVER_LIMIT", currentLimit: { requestsPerUnit: 10, unit: "MINUTE" }, durationUntilReset: "42s" },
        { code: "OK", limitRemaining: 4294967295 },
        { code: "OK", currentLimit: { name: "per-day", requestsPerUnit: 5, unit: "DAY" }, limitRemaining: 3, durationUntilReset: "1.500s" },
      ],
      responseHeadersToAdd: [{ key: "Retry-After", value: "42" }],
      rawBody: Buffer.from('{"error":"rate_limited"}').toString("base64"),
      dynamicMetadata: { descriptors: [{ index: 0, ok: true, none: null }] },
    });
    expect(toProtoJson(response, { overall_code: 1, statuses: [] })).toEqual({ overallCode: "OK" });
  });
});

describe("GET /rlconfig text", () => {
  it("one line per limit in the reference's format, sluice's extensions after it", () => {
    const yaml = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 60}
  - key: tenant
    descriptors:
      - key: plan
        value: pro
        shadow_mode: true
        rate_limits:
          - {unit: second, requests_per_unit: 50}
          - {unit: minute, requests_per_unit: 1000, algorithm: token_bucket, burst: 200}
        quota: {period: month, limit: 100000}
  - key: internal
    rate_limit: {unlimited: true}
`;
    const { rules, errors } = loadRuleFiles([{ name: "edge.yaml", text: yaml }], { mergeDomains: false });
    expect(errors).toEqual([]);
    expect(rlconfigText(rules!)).toBe(
      [
        "edge.remote_address: unit=MINUTE requests_per_unit=60, shadow_mode: false, quota_mode: false",
        "edge.tenant.plan_pro: unit=SECOND requests_per_unit=50, shadow_mode: true, quota_mode: false, limit: rate_limits[0]",
        "edge.tenant.plan_pro: unit=MINUTE requests_per_unit=1000, shadow_mode: true, quota_mode: false, limit: rate_limits[1], algorithm: token_bucket, burst: 200",
        "edge.tenant.plan_pro: unit=MONTH requests_per_unit=100000, shadow_mode: true, quota_mode: false, limit: quota, algorithm: quota (calendar month, UTC)",
        "edge.internal: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false",
        "",
      ].join("\n"),
    );
  });

  it("an approximate limit ends with its sync interval", () => {
    const yaml = `
domain: hot
descriptors:
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 1000, approximate: {}}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 10, approximate: {sync_interval_ms: 250}}
`;
    const { rules, errors } = loadRuleFiles([{ name: "hot.yaml", text: yaml }], { mergeDomains: false });
    expect(errors).toEqual([]);
    expect(rlconfigText(rules!)).toBe(
      [
        "hot.ip: unit=SECOND requests_per_unit=1000, shadow_mode: false, quota_mode: false, approximate: sync_interval_ms 100",
        "hot.user: unit=MINUTE requests_per_unit=60, shadow_mode: false, quota_mode: false, algorithm: token_bucket, burst: 10, approximate: sync_interval_ms 250",
        "",
      ].join("\n"),
    );
  });
});

describe("GET /healthcheck", () => {
  const node = (state: NodeStatus["state"]): NodeStatus => ({ id: "r:7379", state, inFlight: 0 });

  it("200 OK once serving and the store was reached; 500 before, and from shutdown", () => {
    let serving = false;
    let state: NodeStatus["state"] = "down";
    const h = new ReferenceHealth(
      { serving: () => serving, domains: () => 1, store: () => ({ kind: "redis", nodes: [node(state)] }) },
      { atLeastOneDomain: false, storeConnected: false },
    );
    const check = () => h.route()() as { status: number; body: string };
    serving = true;
    expect(check()).toEqual({ status: 500, body: "" }); // the store was never reached
    state = "up";
    expect(check()).toEqual({ status: 200, body: "OK" });
    state = "down"; // reached once: a later outage is the failure policy's business
    expect(check()).toEqual({ status: 200, body: "OK" });
    serving = false;
    expect(check()).toEqual({ status: 500, body: "" });
  });

  it("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION and HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", () => {
    let state: NodeStatus["state"] = "up";
    let domains = 0;
    const h = new ReferenceHealth(
      { serving: () => true, domains: () => domains, store: () => ({ kind: "redis", nodes: [node(state)] }) },
      { atLeastOneDomain: true, storeConnected: true },
    );
    expect(h.healthy()).toBe(false); // no domain
    domains = 2;
    expect(h.healthy()).toBe(true);
    state = "circuit_open";
    expect(h.healthy()).toBe(false);
    state = "up";
    expect(h.healthy()).toBe(true);
  });
});
