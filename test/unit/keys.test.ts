// Pins the exact store key and descriptor path formats: a change here orphans every counter in a
// running Redis (keys) or renames every rule's metrics (paths), so it must be deliberate.
import { describe, expect, it } from "vitest";
import { descriptorPath, descriptorPathWithValue, entriesPath, keysOnlyPath } from "../../src/core/descriptor-path.js";
import { limitStoreKey } from "../../src/limiter/explain-keys.js";
import { keyScanPattern, limitTag, quotaKeyTag, storeKey } from "../../src/core/keys.js";
import { overrideLimit } from "../../src/limiter/override.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { matchLimit } from "../../src/rules/match.js";

const rules = loadRuleFiles(
  [
    {
      name: "r.yaml",
      text: [
        "domain: edge",
        "descriptors:",
        "  - key: api_key",
        "    rate_limit: {unit: minute, requests_per_unit: 10}",
        "  - key: user",
        "    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket}",
        "  - key: plan",
        "    rate_limits:",
        "      - {unit: second, requests_per_unit: 5, algorithm: token_bucket}",
        "      - {unit: hour, requests_per_unit: 500, algorithm: token_bucket}",
        "  - key: tenant",
        "    quota: {period: day, limit: 100}",
        "  - key: org",
        "    quota: {period: month, limit: 1000}",
        "  - key: path",
        "    value: 'v1:*'",
        "    share_threshold: true",
        "    rate_limit: {unit: second, requests_per_unit: 1}",
        "  - key: a",
        "    value: b",
        "    descriptors:",
        "      - key: c",
        "        rate_limit: {unit: day, requests_per_unit: 1}",
      ].join("\n"),
    },
  ],
  { mergeDomains: false },
);

const NOW = Date.UTC(2026, 9, 31, 12);

/** The store keys of every limit a request's descriptor matches. */
function keysOf(entries: [string, string][], prefix = ""): (string | undefined)[] {
  const d = { entries: entries.map(([key, value]) => ({ key, value })) };
  const m = matchLimit(rules.rules!.domains.get("edge")!.root, d.entries)!;
  return m.node.limits.map((l) => limitStoreKey("edge", d, m.nodes, l, NOW, prefix));
}

describe("store keys", () => {
  it("loads the rules", () => expect(rules.errors).toEqual([]));

  it("fixed window: fw and the window's seconds", () => {
    expect(keysOf([["api_key", "k1"]])).toEqual(["sluice:{edge:api_key=k1}:fw60"]);
  });

  it("token bucket: tb alone, tb and the unit's seconds when a descriptor has several", () => {
    expect(keysOf([["user", "u"]])).toEqual(["sluice:{edge:user=u}:tb"]);
    expect(keysOf([["plan", "p"]])).toEqual(["sluice:{edge:plan=p}:tb1", "sluice:{edge:plan=p}:tb3600"]);
  });

  it("quota: q: and the UTC calendar period", () => {
    expect(keysOf([["tenant", "t"]])).toEqual(["sluice:{edge:tenant=t}:q:2026-10-31"]);
    expect(keysOf([["org", "o"]])).toEqual(["sluice:{edge:org=o}:q:2026-10"]);
  });

  it("escapes the characters of the key syntax", () => {
    expect(keysOf([["api_key", "a:b|c=d{e}%f*g#h"]])).toEqual(["sluice:{edge:api_key=a%3Ab%7Cc%3Dd%7Be%7D%25f%2Ag%23h}:fw60"]);
  });

  it("hashes values longer than 64 characters", () => {
    expect(keysOf([["api_key", "x".repeat(64)]])).toEqual([`sluice:{edge:api_key=${"x".repeat(64)}}:fw60`]);
    expect(keysOf([["api_key", "x".repeat(65)]])).toEqual(["sluice:{edge:api_key=#lTfF_fEgSC99WNJentWD9S}:fw60"]);
  });

  it("share_threshold: the rule's pattern, escaped but for a raw *", () => {
    expect(keysOf([["path", "v1:users"]])).toEqual(["sluice:{edge:path=v1%3A*}:fw1"]);
  });

  it("key prefix goes in front, outside the hash tag", () => {
    expect(keysOf([["api_key", "k1"]], "blue:")).toEqual(["blue:sluice:{edge:api_key=k1}:fw60"]);
    expect(keyScanPattern("blue*:")).toBe("blue\\*:sluice:*");
  });

  it("limit tags", () => {
    expect([limitTag("fw", 60), limitTag("tb"), limitTag("tb", 3600), limitTag("q"), quotaKeyTag("2026-10")]).toEqual([
      "fw60",
      "tb",
      "tb3600",
      "q",
      "q:2026-10",
    ]);
    expect(storeKey("d:k=v", "fw1")).toBe("sluice:{d:k=v}:fw1");
  });

  it("a per-request override is a fixed window on the descriptor's own entries", () => {
    const d = {
      entries: [
        { key: "k1", value: "v1" },
        { key: "k2", value: "v2" },
      ],
      override: { unit: "minute" as const, requestsPerUnit: 3 },
    };
    const limit = overrideLimit("edge", d, "allow");
    expect(limit.keyTag).toBe("fw60");
    expect(limitStoreKey("edge", d, [], limit, NOW)).toBe("sluice:{edge:k1=v1|k2=v2}:fw60");
  });
});

describe("descriptor paths", () => {
  const entries = [
    { key: "k1", value: "v1" },
    { key: "k2", value: "" },
  ];

  it("a rule's path: key, and _value when it has one", () => {
    const m = matchLimit(rules.rules!.domains.get("edge")!.root, [
      { key: "a", value: "b" },
      { key: "c", value: "x" },
    ])!;
    expect(m.node.limits[0].path).toBe("edge.a_b.c");
    expect(descriptorPath("edge", "a", "b")).toBe("edge.a_b");
    expect(descriptorPath("edge", "a", "")).toBe("edge.a");
  });

  it("request paths", () => {
    expect(entriesPath("edge", entries)).toBe("edge.k1_v1.k2");
    expect(keysOnlyPath("edge", entries)).toBe("edge.k1.k2");
    expect(overrideLimit("edge", { entries, override: { unit: "second", requestsPerUnit: 1 } }, "allow").path).toBe("edge.k1.k2");
    expect(descriptorPathWithValue("edge", "k2", "")).toBe("edge.k2_");
  });
});

describe("the reference's keys (SLUICE_REFERENCE_KEYS)", () => {
  const refKeys = (entries: [string, string][], prefix = "", nowMs = NOW) => {
    const d = { entries: entries.map(([key, value]) => ({ key, value })) };
    const m = matchLimit(rules.rules!.domains.get("edge")!.root, d.entries)!;
    return m.node.limits.map((l) => limitStoreKey("edge", d, m.nodes, l, nowMs, prefix, true));
  };
  const start = (unitSeconds: number) => Math.floor(NOW / 1000 / unitSeconds) * unitSeconds;

  it("as envoyproxy/ratelimit's cache_key.go writes them: prefix, domain, each key and value, the window start", () => {
    // Its TestGenerateCacheKeys / ...Prefix (now = 1234 s, SECOND): domain_key_value_1234, prefix:domain_key_value_1234.
    const ref = loadRuleFiles(
      [{ name: "d.yaml", text: "domain: domain\ndescriptors:\n  - key: key\n    rate_limit: {unit: second, requests_per_unit: 10}\n" }],
      {
        mergeDomains: false,
      },
    );
    const d = { entries: [{ key: "key", value: "value" }] };
    const m = matchLimit(ref.rules!.domains.get("domain")!.root, d.entries)!;
    expect(limitStoreKey("domain", d, m.nodes, m.node.limits[0], 1_234_000, "", true)).toBe("domain_key_value_1234");
    expect(limitStoreKey("domain", d, m.nodes, m.node.limits[0], 1_234_999, "prefix:", true)).toBe("prefix:domain_key_value_1234");
    expect(refKeys([["api_key", "k1"]])).toEqual([`edge_api_key_k1_${start(60)}`]);
    expect(
      refKeys([
        ["a", "b"],
        ["c", "x|y"],
      ]),
    ).toEqual([`edge_a_b_c_x|y_${start(86_400)}`]);
  });

  it("a share_threshold entry writes its pattern (one counter for every matching value)", () => {
    expect(refKeys([["path", "v1:users"]])).toEqual([`edge_path_v1:*_${start(1)}`]);
  });

  it("token buckets and quotas keep sluice's keys", () => {
    expect(refKeys([["user", "u"]])).toEqual(["sluice:{edge:user=u}:tb"]);
    expect(refKeys([["tenant", "t"]])).toEqual(["sluice:{edge:tenant=t}:q:2026-10-31"]);
  });
});
