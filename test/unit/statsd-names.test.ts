// The reference's stats keys (config_impl.go GetLimit, manager_impl.go, gostats tags) for real rules and
// real limiter decisions: which key each request's counts land under.
import { describe, expect, it } from "vitest";
import { Limiter } from "../../src/limiter/limiter.js";
import type { DescriptorEntry, RateLimitRequest } from "../../src/limiter/types.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { MemoryStore } from "../../src/store/memory.js";
import { RuleCounters } from "../../src/telemetry/rule-counters.js";
import { sanitizeStatName, tagSuffix } from "../../src/telemetry/statsd-names.js";

const RULES = `
domain: d
descriptors:
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: user
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 100}
      - key: api
        value: v1
        descriptors:
          - key: client
            value_to_metric: true
            rate_limit: {unit: minute, requests_per_unit: 100}
  - key: path
    value: "/files/*"
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: bucket
    value: "b*"
    share_threshold: true
    descriptors:
      - key: who
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 100}
  - key: shared
    value: "s*"
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: two
    rate_limits:
      - {unit: minute, requests_per_unit: 100}
      - {unit: hour, requests_per_unit: 1000}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 1}
    shadow_mode: true
`;

async function keysAfter(requests: DescriptorEntry[][], cap = 100) {
  const rules = loadRuleFiles([{ name: "d.yaml", text: RULES }], { mergeDomains: false }).rules!;
  const clock = new ManualClock(1_800_000_000_000_000);
  const limiter = new Limiter(rules, new MemoryStore({ clock }), { clock });
  const counters = new RuleCounters(cap, true);
  counters.touch(rules);
  for (const entries of requests) {
    const req: RateLimitRequest = { domain: "d", hitsAddend: 1, descriptors: [{ entries }] };
    counters.observe(req, await limiter.shouldRateLimit(req));
  }
  const hits = new Map<string, number>();
  for (const c of counters.statSeries()) hits.set(c.stat, (hits.get(c.stat) ?? 0) + c.hits);
  return hits;
}

const e = (...kv: string[]): DescriptorEntry[] => kv.map((s) => ({ key: s.split("=")[0], value: s.split("=")[1] }));

describe("stats keys as the reference builds them", () => {
  it("plain, detailed_metric, value_to_metric on a parent and a leaf, wildcards, share_threshold, several limits", async () => {
    const hits = await keysAfter([
      e("plain=x"),
      e("plain=y"),
      e("user=alice"),
      e("user=alice"),
      e("user=bob"),
      e("route=/a", "method=GET"),
      e("route=/a", "method=POST"),
      e("route=/b", "api=v1", "client=c9"),
      e("path=/files/x.txt"),
      e("bucket=b1", "who=w"),
      e("bucket=b2", "who=w"),
      e("shared=s1"),
      e("shared=s2"),
      e("two=t"),
      e("ip=10.1.2.3"),
      e("ip=10.1.2.3"),
    ]);
    expect(Object.fromEntries(hits)).toEqual({
      "d.plain": 2,
      "d.user_alice": 2,
      "d.user_bob": 1,
      // value_to_metric on `route` names its value; `method` (key only, no flag) stays bare.
      "d.route_/a.method": 2,
      "d.route_/b.api_v1.client_c9": 1,
      // A wildcard with value_to_metric: the request's value.
      "d.path_/files/x.txt": 1,
      // detailed_metric under a share_threshold wildcard: its pattern, the rest as sent.
      "d.bucket_b*.who_w": 2,
      // share_threshold wins over value_to_metric: the pattern.
      "d.shared_s*": 2,
      "d.two": 1,
      "d.two.rate_limits_1": 1,
      "d.ip": 2,
    });
  });

  it("request-named keys are bounded per rule: past the cap, the rule's own key", async () => {
    const hits = await keysAfter([e("user=a"), e("user=b"), e("user=c"), e("route=/1", "method=m"), e("route=/2", "method=m"), e("route=/3", "method=m")], 2);
    expect(Object.fromEntries(hits)).toEqual({
      "d.plain": 0,
      "d.user_a": 1,
      "d.user_b": 1,
      "d.user": 1,
      "d.route_/1.method": 1,
      "d.route_/2.method": 1,
      "d.route.method": 1,
      // Request-named rules without hits have no key yet; the others show 0 (nothing is sent for 0).
      "d.bucket_b*.who": 0,
      "d.two": 0,
      "d.two.rate_limits_1": 0,
      "d.ip": 0,
    });
  });

  it("sanitising names and tags as the reference and gostats do", () => {
    expect(sanitizeStatName("d.ip_10.1.2.3.port_a:b|c")).toBe("d.ip_10_1_2_3.port_a_b_c");
    expect(sanitizeStatName("d.v_1.2.3")).toBe("d.v_1.2.3");
    expect(tagSuffix({ team: "edge.one", env: "prod", empty: "", "": "x" })).toBe(".__env=prod.__team=edge_one");
    expect(tagSuffix({})).toBe("");
  });
});
