// RateLimitConfig resources -> rule files (the one validator reads them), and the reconnect backoff's meaning.
import { describe, expect, it } from "vitest";
import { Backoff } from "../../src/xds/backoff.js";
import { configFile, MAX_DESCRIPTOR_DEPTH, RATE_LIMIT_CONFIG_TYPE, ResourceError } from "../../src/xds/rate-limit-config.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { formatRuleError } from "../../src/rules/model.js";
import { NEEDS_BYTES, resourceEntries, withoutUnchangedBytes } from "../../src/xds/resource-entries.js";
import { encodeConfig, UNIT, type DescriptorMsg, type RateLimitConfigMsg } from "../helpers/xds-server.js";

const any = (c: RateLimitConfigMsg) => ({ type_url: RATE_LIMIT_CONFIG_TYPE, value: encodeConfig(c) });
const load = (...configs: RateLimitConfigMsg[]) =>
  loadRuleFiles(
    configs.map((c, i) => configFile(any(c), i)),
    { mergeDomains: false },
  );

describe("RateLimitConfig -> rule file", () => {
  it("Envoy Gateway's shape reads as the same rules in YAML", () => {
    const file = configFile(
      any({
        name: "default/eg/http",
        domain: "default/eg/http",
        descriptors: [
          {
            key: "route",
            value: "route",
            descriptors: [
              { key: "rule-0-match-0", rate_limit: { unit: UNIT.SECOND, requests_per_unit: 5 }, shadow_mode: true },
              {
                key: "user",
                value: "*",
                rate_limit: { unit: UNIT.WEEK, requests_per_unit: 0, name: "u", replaces: [{ name: "v" }] },
                quota_mode: true,
                detailed_metric: true,
              },
            ],
          },
        ],
      }),
      0,
    );
    expect(file).toEqual({
      name: "default/eg/http",
      text: `domain: default/eg/http
descriptors:
  - key: route
    value: route
    descriptors:
      - key: rule-0-match-0
        rate_limit:
          unit: second
          requests_per_unit: 5
        shadow_mode: true
      - key: user
        value: "*"
        rate_limit:
          unit: week
          requests_per_unit: 0
          name: u
          replaces:
            - name: v
        detailed_metric: true
        quota_mode: true
`,
    });
    const r = loadRuleFiles([file], { mergeDomains: false });
    expect([r.errors, r.rules?.domains.get("default/eg/http")?.ruleCount]).toEqual([[], 2]);
  });

  it("unlimited with the proto's defaults beside it is unlimited; metadata (a Struct) is a map", () => {
    const r = load({
      name: "n",
      domain: "d",
      descriptors: [
        {
          key: "k",
          rate_limit: { unlimited: true },
          metadata: { fields: { team: { stringValue: "edge" }, weight: { numberValue: 2 }, on: { boolValue: true } } },
        },
      ],
    });
    expect(r.errors).toEqual([]);
    const node = r.rules!.domains.get("d")!.root.keyOnly.get("k")!;
    expect([node.limits[0].unlimited, node.metadata]).toEqual([true, { team: "edge", weight: 2, on: true }]);
  });

  it("errors name the resource and the descriptor path, as a file's would", () => {
    const broken: RateLimitConfigMsg = {
      name: "broken",
      domain: "api",
      descriptors: [
        { key: "a", rate_limit: { unit: UNIT.UNKNOWN, requests_per_unit: 5 } },
        { key: "b", rate_limit: { unit: 9, requests_per_unit: 5 } },
        { key: "c", rate_limit: { unlimited: true, unit: UNIT.MINUTE } },
        { key: "" },
      ],
    };
    const r = load(broken);
    expect(r.errors.map((e) => formatRuleError({ ...e, line: 0 }))).toEqual([
      "broken: api.a: rate limit unit must be set (invalid rate limit unit '')",
      "broken: api.b: invalid rate limit unit 'unit number 9'",
      "broken: api.c: should not specify rate limit unit when unlimited",
      "broken: api: descriptor has empty key",
    ]);
    expect(load({ name: "", domain: "" }).errors.map((e) => `${e.file}: ${e.message}`)).toEqual(["resource[0]: config file cannot have empty domain"]);
  });

  it("what cannot be a RateLimitConfig is refused before the validator", () => {
    expect(() => configFile({ type_url: "type.googleapis.com/x.Y", value: new Uint8Array() }, 2)).toThrow(
      new ResourceError("resource[2]", `type type.googleapis.com/x.Y is not ${RATE_LIMIT_CONFIG_TYPE}`),
    );
    expect(() => configFile({ type_url: RATE_LIMIT_CONFIG_TYPE, value: Uint8Array.from([0x0a, 0xff]) }, 0)).toThrow(/^resource\[0\]: not a RateLimitConfig: /);
    let deep: DescriptorMsg = { key: "leaf", rate_limit: { unit: UNIT.SECOND, requests_per_unit: 1 } };
    for (let i = 0; i < MAX_DESCRIPTOR_DEPTH; i++) deep = { key: `k${i}`, descriptors: [deep] };
    expect(() => configFile(any({ name: "deep", domain: "d", descriptors: [deep] }), 0)).toThrow(
      new ResourceError("deep", `descriptors nested deeper than ${MAX_DESCRIPTOR_DEPTH} levels`),
    );
  });
});

describe("reconnect backoff (the reference's jpillora/backoff meaning)", () => {
  it("the reference's default factor 0.5 keeps every wait at the initial interval, jitter or not", () => {
    const b = new Backoff({ initialMs: 10_000, maxMs: 60_000, factor: 0.5, jitter: true }, () => 0.9);
    expect([b.next(), b.next(), b.next()]).toEqual([10_000, 10_000, 10_000]);
  });

  it("a factor above 1 grows the wait up to the maximum; reset starts over", () => {
    const b = new Backoff({ initialMs: 100, maxMs: 500, factor: 2, jitter: false });
    expect([b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([100, 200, 400, 500, 500]);
    b.reset();
    expect(b.next()).toBe(100);
  });

  it("jitter picks uniformly between the initial wait and the grown one; factor 0 means 2", () => {
    const b = new Backoff({ initialMs: 100, maxMs: 10_000, factor: 0, jitter: true }, () => 0.5);
    expect([b.next(), b.next(), b.next()]).toEqual([100, 150, 250]);
  });
});

describe("a reload's resources for the compile process", () => {
  const web = any({ name: "web", domain: "web", descriptors: [{ key: "a", rate_limit: { unit: UNIT.SECOND, requests_per_unit: 1 } }] });
  const api = any({ name: "api", domain: "api", descriptors: [{ key: "b", rate_limit: { unit: UNIT.SECOND, requests_per_unit: 1 } }] });
  const apiEdited = any({ name: "api", domain: "api", descriptors: [{ key: "b", rate_limit: { unit: UNIT.SECOND, requests_per_unit: 2 } }] });
  const inForce = new Map(resourceEntries([web, api]).map((e) => [e.name, { hash: e.hash, domain: e.name }]));

  it("leave out the bytes of a resource unchanged since the rules in force, and only those", () => {
    const slim = withoutUnchangedBytes([web, apiEdited, { type_url: RATE_LIMIT_CONFIG_TYPE, value: new Uint8Array([0x12, 0]) }], inForce);
    expect(slim.map((r) => [r.value === undefined, r.kept?.name])).toEqual([
      [true, "web"],
      [false, undefined],
      [false, undefined],
    ]);
    // The compile process sees the same names and hashes as from every byte.
    const names = (rs: typeof slim) => resourceEntries(rs).map((e) => [e.name, e.hash]);
    expect(names(slim)).toEqual(names([web, apiEdited, { type_url: RATE_LIMIT_CONFIG_TYPE, value: new Uint8Array([0x12, 0]) }]));
    expect(() => resourceEntries(slim)[0].text()).toThrow(`${NEEDS_BYTES} web`);
  });

  it("send every byte of a first load", () => {
    expect(withoutUnchangedBytes([web, api], new Map())).toEqual([web, api]);
  });
});
