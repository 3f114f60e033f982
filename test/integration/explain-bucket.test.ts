// `sluice explain --bucket`: an RLQS bucket id through the real CLI, read as the descriptor of its entries sorted
// by key (whatever order it is written in), each bucket alone, with the assignment Envoy gets; the assignment text
// agrees with what an RLQS stream decides (rlqs/buckets.ts) for each kind of rule.
import { describe, expect, it } from "vitest";
import { bucketAssignment } from "../../src/inspect/explain.js";
import { loadRuleDir } from "../../src/rules/load.js";
import { bucketRule } from "../../src/rlqs/buckets.js";
import { MemoryStore } from "../../src/store/memory.js";
import { ruleDir, runCli } from "../helpers/sluice.js";

const RULES = `domain: d
descriptors:
  - key: name
    value: api
    rate_limit: {unit: minute, requests_per_unit: 600}
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 50}
  - key: name
    value: closed
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: name
    value: open
    rate_limit: {unlimited: true}
  - key: name
    value: watched
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
`;

function explainOut(dir: string, ...args: string[]): string {
  const r = runCli(["explain", "--config", dir, "--domain", "d", "--at", "2026-10-31T23:59:00Z", ...args]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return r.stdout;
}

describe("sluice explain --bucket", () => {
  const dir = ruleDir({ "d.yaml": RULES });

  it("reads user=alice,name=api as the descriptor name=api,user=alice: its rule, limit and key, and leases", () => {
    const out = explainOut(dir, "--bucket", "user=alice,name=api");
    expect(out).toBe(
      [
        `domain d: ${dir}/d.yaml (failure_mode allow unless a descriptor says otherwise)`,
        "",
        "bucket 1: name=api,user=alice (the descriptor of its entries sorted by key)",
        `  rule: d.name_api.user (${dir}/d.yaml:7)`,
        "  matched:",
        `    name=api  by value 'api' (${dir}/d.yaml:3)`,
        `    user=alice  by key 'user' (any value: each value counted apart) (${dir}/d.yaml:7)`,
        "  limits:",
        `    rate_limit: 50 per hour, fixed_window, failure_mode allow (${dir}/d.yaml:7)`,
        "      key: sluice:{d:name=api|user=alice}:fw3600 (even windows; odd windows: sluice:{d:name=api|user=alice}:fw3600:1)",
        "  RLQS: leases: units taken from the key above before Envoy may spend them, sent as token buckets; DENY_ALL once the window's units are all leased",
        "",
      ].join("\n"),
    );
    // Written in either order, the same bucket; and its block is the descriptor's, line for line.
    expect(explainOut(dir, "--bucket", "name=api,user=alice")).toBe(out);
    const asDescriptor = explainOut(dir, "--descriptor", "name=api,user=alice").split("\n").slice(3);
    expect(out.split("\n").slice(3, 3 + asDescriptor.length - 1)).toEqual(asDescriptor.slice(0, -1));
  });

  it("says what each kind of rule assigns: DENY_ALL for 0, ALLOW_ALL for unlimited, shadow-only and no rule", () => {
    const out = explainOut(dir, "--bucket", "name=closed", "--bucket", "name=open", "--bucket", "name=watched", "--bucket", "name=elsewhere");
    const rlqs = out.split("\n").filter((l) => l.startsWith("  RLQS: "));
    expect(rlqs).toEqual([
      "  RLQS: DENY_ALL (a limit of 0), nothing counted",
      "  RLQS: ALLOW_ALL (no limit in force is counted), nothing counted",
      "  RLQS: ALLOW_ALL (no limit in force is counted), nothing counted",
      "  RLQS: ALLOW_ALL (the default for a bucket no rule matches), nothing counted",
    ]);
    expect(out).toContain(
      "bucket 4: name=elsewhere (the descriptor of its entries sorted by key)\n  no rule: entry name=elsewhere: no descriptor for value 'elsewhere' of key 'name'",
    );
  });

  it("agrees with the RLQS stream's decision for each rule", () => {
    const rules = loadRuleDir(dir, { mergeDomains: false }).rules!;
    const store = new MemoryStore();
    const kinds = { api: "leases", closed: "deny", open: "allow", watched: "allow" } as const;
    const text = { leases: "leases: ", deny: "DENY_ALL", allow: "ALLOW_ALL" };
    for (const [value, kind] of Object.entries(kinds)) {
      const entries = [{ key: "name", value }];
      const decided = bucketRule(rules, "d", entries, store, "", Date.now());
      expect(decided.kind, value).toBe(kind);
      const explained = bucketAssignment(decided.kind === "none" ? [] : decided.limits);
      expect(explained.startsWith(text[kind]), `${value}: ${explained}`).toBe(true);
    }
  });

  it("refuses a bucket id the wire refuses (a key twice, an empty value) with a usage error", () => {
    const twice = runCli(["explain", "--config", dir, "--domain", "d", "--bucket", "name=a,name=b"]);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain("sluice: --bucket 'name=a,name=b': bucket id key name appears twice");
    const empty = runCli(["explain", "--config", dir, "--domain", "d", "--bucket", "name="]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain("sluice: --bucket 'name=': bucket id entry name has an empty value");
    const none = runCli(["explain", "--config", dir, "--domain", "d"]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("explain needs at least one --descriptor k=v[,k=v...] or --bucket k=v[,k=v...]");
  });
});
