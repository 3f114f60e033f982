// Values of secret descriptor keys (src/core/secret.ts): a keyed hash in store keys (32 hex digits) and as shown
// (its first 12, /top's secretHash), and rule paths written with such a value shown hashed. Pins the key format:
// a change orphans those counters.
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { descriptorTag } from "../../src/core/keys.js";
import { SecretValues, secretHash } from "../../src/core/secret.js";
import { limitStoreKey } from "../../src/limiter/explain-keys.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { matchLimit } from "../../src/rules/match.js";
import type { Limit } from "../../src/rules/model.js";
import { descriptorLabel } from "../../src/telemetry/rule-counters.js";

const secrets = new SecretValues(["api_key", "token"], "k");
const hmac = (v: string) => createHmac("sha256", "k").update(v).digest("hex");

const rules = loadRuleFiles(
  [
    {
      name: "r.yaml",
      text: [
        "domain: edge",
        "descriptors:",
        "  - key: api_key",
        "    rate_limit: {unit: minute, requests_per_unit: 10}",
        "  - key: api_key",
        "    value: sk-live-1234",
        "    rate_limit: {unit: minute, requests_per_unit: 99}",
        "    descriptors:",
        "      - key: plan",
        "        value: pro",
        "        quota: {period: month, limit: 1000}",
        "  - key: user",
        "    value: alice",
        "    rate_limit: {unit: second, requests_per_unit: 5}",
        "  - key: token",
        "    value: 'tok-*'",
        "    share_threshold: true",
        "    rate_limit: {unit: second, requests_per_unit: 1}",
      ].join("\n"),
    },
  ],
  { mergeDomains: false },
);
const edge = rules.rules!.domains.get("edge")!;

function limitsOf(entries: [string, string][]): { limits: Limit[]; key: (l: Limit) => string | undefined } {
  const d = { entries: entries.map(([key, value]) => ({ key, value })) };
  const m = matchLimit(edge.root, d.entries)!;
  return { limits: m.node.limits, key: (l) => limitStoreKey("edge", d, m.nodes, l, Date.UTC(2026, 9, 31), "", false, secrets) };
}

describe("secret values", () => {
  it("load", () => expect(rules.errors).toEqual([]));

  it("are HMAC-SHA256 under the hash key: 32 hex digits in store keys, the first 12 as shown (what /top shows)", () => {
    expect(secrets.inKey("sk-1")).toBe("#" + hmac("sk-1").slice(0, 32));
    expect(secrets.shown("sk-1")).toBe("#" + hmac("sk-1").slice(0, 12));
    expect(secrets.shown("sk-1")).toBe(secretHash("k", "sk-1"));
    expect(secrets.shownValue("user", "alice")).toBe("alice");
    expect(new SecretValues(["api_key"], "other").inKey("sk-1")).not.toBe(secrets.inKey("sk-1"));
  });

  it("go into store keys hashed, at any length; other values as before; a shared pattern stays a pattern", () => {
    const k = limitsOf([["api_key", "sk-1"]]);
    expect(k.key(k.limits[0])).toBe(`sluice:{edge:api_key=#${hmac("sk-1").slice(0, 32)}}:fw60`);
    const long = "x".repeat(200);
    const kl = limitsOf([["api_key", long]]);
    expect(kl.key(kl.limits[0])).toBe(`sluice:{edge:api_key=#${hmac(long).slice(0, 32)}}:fw60`);
    const u = limitsOf([["user", "alice"]]);
    expect(u.key(u.limits[0])).toBe("sluice:{edge:user=alice}:fw1");
    const t = limitsOf([["token", "tok-9"]]);
    expect(t.key(t.limits[0])).toBe("sluice:{edge:token=tok-*}:fw1");
    // Without secrets (the reference's keys, or an empty list) the value is as it was.
    expect(descriptorTag("edge", { entries: [{ key: "api_key", value: "sk-1" }] }, undefined)).toBe("edge:api_key=sk-1");
  });

  it("show hashed in a rule path written with one, there and in every path below it; other paths unchanged", () => {
    secrets.learn(rules.rules!);
    const lit = limitsOf([["api_key", "sk-live-1234"]]);
    expect(lit.limits[0].path).toBe("edge.api_key_sk-live-1234");
    expect(secrets.path(lit.limits[0])).toBe(`edge.api_key_#${hmac("sk-live-1234").slice(0, 12)}`);
    const below = limitsOf([
      ["api_key", "sk-live-1234"],
      ["plan", "pro"],
    ]);
    expect(secrets.path(below.limits[0])).toBe(`edge.api_key_#${hmac("sk-live-1234").slice(0, 12)}.plan_pro`);
    const user = limitsOf([["user", "alice"]]);
    expect(secrets.path(user.limits[0])).toBe("edge.user_alice");
    const anyKey = limitsOf([["api_key", "other"]]);
    expect(secrets.path(anyKey.limits[0])).toBe("edge.api_key");
    // A detailed_metric label: the request's secret value as shown.
    expect(
      descriptorLabel(
        [
          { key: "api_key", value: "sk-1" },
          { key: "user", value: "alice" },
        ],
        secrets,
      ),
    ).toBe(`api_key=#${hmac("sk-1").slice(0, 12)},user=alice`);
  });

  it("a reload walks only the domains it changed: a new domain's secret path is learned, a kept one's stays", () => {
    const load = (domain: string, value: string) =>
      loadRuleFiles(
        [
          {
            name: `${domain}.yaml`,
            text: `domain: ${domain}\ndescriptors:\n  - key: api_key\n    value: ${value}\n    rate_limit: {unit: minute, requests_per_unit: 5}\n`,
          },
        ],
        { mergeDomains: false },
      ).rules!.domains.get(domain)!;
    const s = new SecretValues(["api_key"], "k");
    const a = load("a", "sk-a");
    const b1 = load("b", "sk-b1");
    s.learn({
      domains: new Map([
        ["a", a],
        ["b", b1],
      ]),
    });
    // The reload keeps domain a (the same compiled tree) and replaces b.
    const b2 = load("b", "sk-b2");
    s.learn({
      domains: new Map([
        ["a", a],
        ["b", b2],
      ]),
    });
    const first = (d: typeof a) => [...[...d.root.exact.values()][0].values()][0].limits[0];
    expect(s.path(first(a))).toBe(`a.api_key_#${hmac("sk-a").slice(0, 12)}`);
    expect(s.path(first(b2))).toBe(`b.api_key_#${hmac("sk-b2").slice(0, 12)}`);
  });

  it("a domain of 10,000 secret values is walked in steps of at most 256 hashes; one left half-way is walked again whole", () => {
    const text = ["domain: big", "descriptors:"];
    for (let i = 0; i < 10_000; i++) text.push("  - key: api_key", `    value: sk-${i}`, "    rate_limit: {unit: minute, requests_per_unit: 5}");
    const big = loadRuleFiles([{ name: "big.yaml", text: text.join("\n") + "\n" }], { mergeDomains: false }).rules!.domains.get("big")!;
    const limits = [...[...big.root.exact.values()][0].values()].map((n) => n.limits[0]);
    const shownPaths = (s: SecretValues) => limits.filter((l, i) => s.path(l) === `big.api_key_#${hmac(`sk-${i}`).slice(0, 12)}`).length;

    const s = new SecretValues(["api_key"], "k");
    let hashes = 0;
    const counted = s.inKey.bind(s);
    s.inKey = (v: string) => {
      hashes++;
      return counted(v);
    };
    let steps = 0;
    let most = 0;
    for (const _ of s.learnSteps(big)) {
      most = Math.max(most, hashes);
      hashes = 0;
      steps++;
    }
    most = Math.max(most, hashes);
    expect(most).toBe(256);
    expect(steps).toBe(Math.ceil(10_000 / 256) - 1);
    expect(shownPaths(s)).toBe(10_000);
    // Walked: a second walk has no step and hashes nothing.
    hashes = 0;
    expect([...s.learnSteps(big)].length).toBe(0);
    expect(hashes).toBe(0);

    // Left after 3 steps (a reload given up): not counted as walked, so learn() walks it again, whole.
    const t = new SecretValues(["api_key"], "k");
    const walk = t.learnSteps(big);
    for (let i = 0; i < 3; i++) walk.next();
    expect(shownPaths(t)).toBe(3 * 256);
    t.learn({ domains: new Map([["big", big]]) });
    expect(shownPaths(t)).toBe(10_000);
  });
});
