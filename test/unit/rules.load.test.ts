// Loader validation beyond the reference fixtures, matching semantics, and directory loading.
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { algorithm } from "../../src/counters/registry.js";
import { loadRuleDir, loadRuleFiles } from "../../src/rules/load.js";
import { matchLimit } from "../../src/rules/match.js";
import type { RuleError, RuleSet } from "../../src/rules/model.js";

const err = (file: string, line: number, path: string, message: string): RuleError => ({ file, line, path, message });

function errorsOf(text: string): RuleError[] {
  const r = loadRuleFiles([{ name: "r.yaml", text }], { mergeDomains: false });
  expect(r.rules).toBeUndefined();
  return r.errors;
}

function rulesOf(text: string): RuleSet {
  const r = loadRuleFiles([{ name: "r.yaml", text }], { mergeDomains: false });
  expect(r.errors).toEqual([]);
  return r.rules!;
}

function find(rules: RuleSet, domain: string, entries: [string, string][]) {
  return matchLimit(
    rules.domains.get(domain)!.root,
    entries.map(([key, value]) => ({ key, value })),
  );
}

const doc = (descriptors: string) => `domain: d\ndescriptors:\n${descriptors}`;

describe("validation", () => {
  it("reports every error of a file, in line order", () => {
    const text = doc(
      [
        "  - key: a", //                    3
        "    rate_limit:", //               4
        "      unit: fortnight", //         5
        "      requests_per_unit: 1.5", //  6
        "  - key: ''", //                   7
        "  - key: b", //                    8
        "    shadow: true", //              9
        "    rate_limit: {unit: hour, requests_per_unit: 1}",
        "  - key: c", //                   11
        "    value: x", //                 12
        "    share_threshold: true", //    13
        "    rate_limit: {unit: hour, requests_per_unit: 1}",
      ].join("\n"),
    );
    expect(errorsOf(text)).toEqual([
      err("r.yaml", 5, "d.a", "invalid rate limit unit 'fortnight'"),
      err("r.yaml", 6, "d.a", "error checking config: 'requests_per_unit' must be an integer >= 0, got 1.5"),
      err("r.yaml", 7, "d", "descriptor has empty key"),
      err("r.yaml", 9, "d.b", "config error, unknown key 'shadow'"),
      err("r.yaml", 13, "d.c_x", "share_threshold can only be used with wildcard values (containing '*'), but found key 'd.c_x'"),
    ]);
  });

  it.each<[string, string, RuleError[]]>([
    [
      "float count",
      "  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1.0}",
      [err("r.yaml", 4, "d.a", "error checking config: 'requests_per_unit' must be an integer >= 0, got 1.0")],
    ],
    [
      "negative count",
      "  - key: a\n    rate_limit: {unit: day, requests_per_unit: -1}",
      [err("r.yaml", 4, "d.a", "error checking config: 'requests_per_unit' must be an integer >= 0, got -1")],
    ],
    [
      "string count",
      "  - key: a\n    rate_limit: {unit: day, requests_per_unit: '5'}",
      [err("r.yaml", 4, "d.a", "error checking config: 'requests_per_unit' must be an integer >= 0, got '5'")],
    ],
    [
      "missing unit",
      "  - key: a\n    rate_limit:\n      requests_per_unit: 3",
      [err("r.yaml", 4, "d.a", "rate limit unit must be set (invalid rate limit unit '')")],
    ],
    ["missing count", "  - key: a\n    rate_limit:\n      unit: day", [err("r.yaml", 4, "d.a", "requests_per_unit must be set (use 0 to block all requests)")]],
    [
      "unlimited with count",
      "  - key: a\n    rate_limit:\n      unlimited: true\n      requests_per_unit: 3",
      [err("r.yaml", 6, "d.a", "should not specify requests_per_unit when unlimited")],
    ],
    [
      "unlimited with algorithm",
      "  - key: a\n    rate_limit:\n      unlimited: true\n      algorithm: token_bucket",
      [err("r.yaml", 6, "d.a", "should not specify algorithm when unlimited")],
    ],
    [
      "unlimited not a bool",
      "  - key: a\n    rate_limit:\n      unlimited: yes",
      [err("r.yaml", 5, "d.a", "error checking config: 'unlimited' must be true or false, got 'yes'")],
    ],
    [
      "burst without token_bucket",
      "  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 3\n      burst: 5",
      [err("r.yaml", 7, "d.a", "burst can only be used with algorithm token_bucket")],
    ],
    [
      "burst 0",
      "  - key: a\n    rate_limit:\n      algorithm: token_bucket\n      unit: second\n      requests_per_unit: 3\n      burst: 0",
      [err("r.yaml", 8, "d.a", "error checking config: 'burst' must be an integer >= 1, got 0")],
    ],
    [
      "burst float",
      "  - key: a\n    rate_limit:\n      algorithm: token_bucket\n      unit: second\n      requests_per_unit: 3\n      burst: 2.5",
      [err("r.yaml", 8, "d.a", "error checking config: 'burst' must be an integer >= 1, got 2.5")],
    ],
    [
      "unknown algorithm",
      "  - key: a\n    rate_limit:\n      algorithm: leaky\n      unit: second\n      requests_per_unit: 3",
      [err("r.yaml", 5, "d.a", "invalid algorithm 'leaky' (expected fixed_window, token_bucket or sliding_window)")],
    ],
    ["rate_limit not a map", "  - key: a\n    rate_limit: 5", [err("r.yaml", 4, "d.a", "rate_limit must be a map")]],
    [
      "metadata not a map",
      "  - key: a\n    metadata: [x]\n    rate_limit: {unit: day, requests_per_unit: 1}",
      [err("r.yaml", 4, "d.a", "error parsing metadata: metadata must be a map")],
    ],
    ["descriptors not a list", "  - key: a\n    descriptors: {key: b}", [err("r.yaml", 4, "d.a", "descriptors must be a list of maps")]],
    [
      "unknown key in replaces",
      "  - key: a\n    rate_limit:\n      unit: day\n      requests_per_unit: 1\n      replaces: [{nam: x}]",
      [err("r.yaml", 7, "d.a", "config error, unknown key 'nam'"), err("r.yaml", 7, "d.a", "should not have an empty replaces entry")],
    ],
    [
      "float value",
      "  - key: a\n    value: 1.5\n    rate_limit: {unit: day, requests_per_unit: 1}",
      [err("r.yaml", 4, "d.a", "error checking config: 'value' must be a string, got 1.5")],
    ],
    [
      "key-only node twice (value '' is no value)",
      "  - key: a\n  - key: a\n    value: ''",
      [err("r.yaml", 4, "d.a", "duplicate descriptor composite key 'd.a'")],
    ],
    [
      "wildcard twice",
      "  - {key: a, value: 'x*', rate_limit: {unit: day, requests_per_unit: 1}}\n  - {key: a, value: 'x*', rate_limit: {unit: day, requests_per_unit: 2}}",
      [err("r.yaml", 4, "d.a_x*", "duplicate descriptor composite key 'd.a_x*'")],
    ],
  ])("%s", (_name, descriptors, expected) => {
    expect(errorsOf(doc(descriptors))).toEqual(expected);
  });

  it("rejects unknown top-level keys, and YAML duplicate map keys", () => {
    expect(errorsOf("domain: d\nfail_mode: allow\n")).toEqual([err("r.yaml", 2, "d", "config error, unknown key 'fail_mode'")]);
    const dup = errorsOf("domain: d\ndomain: e\n");
    expect(dup).toEqual([{ file: "r.yaml", line: 2, path: "", message: expect.stringMatching(/^error loading config file: Map keys must be unique/) }]);
  });

  it("rejects a file that is a list or empty", () => {
    expect(errorsOf("- a\n")).toEqual([err("r.yaml", 1, "", "config error, the file must be a map with 'domain' and 'descriptors'")]);
    expect(errorsOf("# nothing\n")).toEqual([err("r.yaml", 1, "", "config file cannot have empty domain")]);
    expect(errorsOf("domain: ''\n")).toEqual([err("r.yaml", 1, "", "config file cannot have empty domain")]);
  });

  it("reports the errors of every file and then gives no rules", () => {
    const r = loadRuleFiles(
      [
        { name: "a.yaml", text: "domain: a\n" },
        { name: "b.yaml", text: "domain: b\ndescriptors:\n  - key: x\n    rate_limit: {unit: foo, requests_per_unit: 1}\n" },
        { name: "c.yaml", text: "descriptors:\n" },
      ],
      { mergeDomains: false },
    );
    expect(r.rules).toBeUndefined();
    expect(r.errors).toEqual([err("b.yaml", 4, "b.x", "invalid rate limit unit 'foo'"), err("c.yaml", 1, "", "config file cannot have empty domain")]);
  });
});

describe("compiled limits", () => {
  it("accepts a domain without descriptors", () => {
    const rules = rulesOf("domain: d\ndescriptors:\n");
    expect(rules.domains.get("d")).toMatchObject({ domain: "d", files: ["r.yaml"], ruleCount: 0 });
    expect(rulesOf("domain: d\n").domains.get("d")!.ruleCount).toBe(0);
  });

  it("reads units case-insensitively and defaults algorithm and burst", () => {
    const rules = rulesOf(doc("  - key: a\n    rate_limit: {unit: SECOND, requests_per_unit: 7}"));
    expect(find(rules, "d", [["a", "1"]])!.node.limits[0]).toEqual({
      path: "d.a",
      label: "rate_limit",
      source: { file: "r.yaml", line: 3 },
      keyTag: "fw1",
      failureMode: "allow",
      unit: "second",
      requestsPerUnit: 7,
      capacity: 7,
      algorithm: "fixed_window",
      unlimited: false,
      name: "",
      replaces: [],
      shadowMode: false,
      detailedMetric: false,
      valueToMetric: false,
      quotaMode: false,
    });
  });

  it("token bucket: burst defaults to requests_per_unit, or is set", () => {
    const rules = rulesOf(
      doc(
        [
          "  - key: a",
          "    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 60}",
          "  - key: b",
          "    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 60, burst: 10}",
        ].join("\n"),
      ),
    );
    const a = find(rules, "d", [["a", "x"]])!.node.limits[0];
    const b = find(rules, "d", [["b", "x"]])!.node.limits[0];
    expect([a.algorithm, a.requestsPerUnit, a.capacity]).toEqual(["token_bucket", 60, 60]);
    expect([b.algorithm, b.requestsPerUnit, b.capacity]).toEqual(["token_bucket", 60, 10]);
  });

  it("reads integer and boolean values as their text, like the reference", () => {
    const rules = rulesOf(doc("  - key: code\n    value: 404\n    rate_limit: {unit: day, requests_per_unit: 1}"));
    expect(find(rules, "d", [["code", "404"]])!.node.limits[0].path).toBe("d.code_404");
  });
});

describe("matching", () => {
  const rules = rulesOf(
    doc(
      [
        "  - key: a", //                      3
        "    value: b_c",
        "    rate_limit: {unit: second, requests_per_unit: 1}",
        "  - key: a_b", //                    6
        "    value: c",
        "    rate_limit: {unit: second, requests_per_unit: 2}",
        "  - key: w",
        "    value: 'b_*'",
        "    rate_limit: {unit: second, requests_per_unit: 3}",
        "  - key: w",
        "    value: 'b*'",
        "    rate_limit: {unit: second, requests_per_unit: 4}",
        "  - key: w",
        "    rate_limit: {unit: second, requests_per_unit: 5}",
        "  - key: w",
        "    value: b_exact",
        "    rate_limit: {unit: second, requests_per_unit: 6}",
        "  - key: w",
        "    value: allowed",
        "  - key: parent",
        "    descriptors:",
        "      - key: child",
        "        rate_limit: {unit: second, requests_per_unit: 7}",
      ].join("\n"),
    ),
  );
  const rpu = (entries: [string, string][]) => find(rules, "d", entries)?.node.limits[0].requestsPerUnit;

  it("keeps (a, b_c) and (a_b, c) apart", () => {
    expect(rpu([["a", "b_c"]])).toBe(1);
    expect(rpu([["a_b", "c"]])).toBe(2);
    expect(rpu([["a", "b"]])).toBeUndefined();
  });

  it("never matches across the key/value boundary", () => {
    // the reference would let (w, b_*) match key "w_b" via the composite "w_b_..."
    expect(rpu([["w_b", "x"]])).toBeUndefined();
  });

  it("exact value, then the first matching wildcard in file order, then the key-only node", () => {
    expect(rpu([["w", "b_exact"]])).toBe(6);
    expect(rpu([["w", "b_1"]])).toBe(3);
    expect(rpu([["w", "bz"]])).toBe(4);
    expect(rpu([["w", "zzz"]])).toBe(5);
    expect(rpu([["w", ""]])).toBe(5);
  });

  it("a value without limit or children whitelists", () => {
    expect(rpu([["w", "allowed"]])).toBeUndefined();
  });

  it("needs the whole request consumed and a limit at the end, without backtracking", () => {
    expect(
      rpu([
        ["parent", "p"],
        ["child", "c"],
      ]),
    ).toBe(7);
    expect(rpu([["parent", "p"]])).toBeUndefined();
    expect(
      rpu([
        ["parent", "p"],
        ["other", "c"],
      ]),
    ).toBeUndefined();
    expect(
      rpu([
        ["w", "zzz"],
        ["child", "c"],
      ]),
    ).toBeUndefined();
    expect(rpu([])).toBeUndefined();
  });

  it("returns the matched node per entry", () => {
    const m = find(rules, "d", [
      ["parent", "p"],
      ["child", "c"],
    ])!;
    expect(m.nodes.map((n) => `${n.key}=${n.value}@${n.source.line}`)).toEqual(["parent=@22", "child=@24"]);
    expect(m.node).toBe(m.nodes[1]);
    expect(m.node.limits).toHaveLength(1);
  });
});

describe("loadRuleDir", () => {
  let base: string;
  const rule = (domain: string, key = "k") => `domain: ${domain}\ndescriptors:\n  - key: ${key}\n    rate_limit: {unit: minute, requests_per_unit: 1}\n`;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), "sluice-rules-"));
  });
  afterAll(() => {
    rmSync(base, { recursive: true, force: true });
  });

  it("loads top-level *.yaml and *.yml sorted by name, follows symlinks, skips dot-files and sub-directories", () => {
    const dir = join(base, "rules");
    const outside = join(base, "outside");
    mkdirSync(dir);
    mkdirSync(outside);
    writeFileSync(join(dir, "b.yaml"), rule("shared", "second"));
    writeFileSync(join(dir, "a.yml"), rule("shared", "first"));
    writeFileSync(join(outside, "linked.yaml"), rule("linked"));
    symlinkSync(join(outside, "linked.yaml"), join(dir, "c.yaml"));
    writeFileSync(join(dir, ".hidden.yaml"), "not: [valid");
    writeFileSync(join(dir, "notes.txt"), "not: [valid");
    mkdirSync(join(dir, "sub"));
    writeFileSync(join(dir, "sub", "deep.yaml"), "not: [valid");
    mkdirSync(join(dir, "dir.yaml"));

    const r = loadRuleDir(dir, { mergeDomains: true });
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    const shared = r.rules!.domains.get("shared")!;
    expect(shared.files).toEqual([join(dir, "a.yml"), join(dir, "b.yaml")]);
    expect(shared.ruleCount).toBe(2);
    expect(r.rules!.domains.get("linked")!.files).toEqual([join(dir, "c.yaml")]);
    expect([...r.rules!.domains.keys()]).toEqual(["shared", "linked"]);

    const strict = loadRuleDir(dir, { mergeDomains: false });
    expect(strict.rules).toBeUndefined();
    expect(strict.errors).toEqual([err(join(dir, "b.yaml"), 1, "shared", `duplicate domain 'shared' in config file (also in ${join(dir, "a.yml")})`)]);
  });

  it("a missing directory is an error", () => {
    const dir = join(base, "missing");
    const r = loadRuleDir(dir, { mergeDomains: false });
    expect(r.rules).toBeUndefined();
    expect(r.errors).toEqual([{ file: dir, line: 0, path: "", message: expect.stringMatching(/^cannot read rule directory: ENOENT/) }]);
  });

  it("an empty directory is valid with a warning", () => {
    const dir = join(base, "empty");
    mkdirSync(dir);
    const r = loadRuleDir(dir, { mergeDomains: false });
    expect(r.errors).toEqual([]);
    expect(r.rules!.domains.size).toBe(0);
    expect(r.warnings).toEqual([`no rule files (*.yaml, *.yml) in ${dir}`]);
  });

  it("a broken symlink is an error", () => {
    const dir = join(base, "broken");
    mkdirSync(dir);
    symlinkSync(join(base, "nowhere.yaml"), join(dir, "gone.yaml"));
    const r = loadRuleDir(dir, { mergeDomains: false });
    expect(r.rules).toBeUndefined();
    expect(r.errors).toEqual([{ file: join(dir, "gone.yaml"), line: 0, path: "", message: expect.stringMatching(/^cannot read rule file: ENOENT/) }]);
  });
});

describe("extensions: rate_limits, quota, failure_mode", () => {
  it("reads several rate limits and a quota on one descriptor, each with its own key tag", () => {
    const rules = rulesOf(
      doc(
        [
          "  - key: api_key", //                                                        3
          "    rate_limits:",
          "      - {unit: second, requests_per_unit: 20, name: burst}", //                5
          "      - {unit: hour, requests_per_unit: 1000}",
          "      - {unit: minute, requests_per_unit: 100, algorithm: token_bucket}",
          "    quota: {period: month, limit: 1000000, name: monthly}", //                8
        ].join("\n"),
      ),
    );
    const limits = find(rules, "d", [["api_key", "k"]])!.node.limits;
    expect(limits.map((l) => [l.label, l.algorithm, l.unit, l.requestsPerUnit, l.keyTag, l.name, l.source.line])).toEqual([
      ["rate_limits[0]", "fixed_window", "second", 20, "fw1", "burst", 5],
      ["rate_limits[1]", "fixed_window", "hour", 1000, "fw3600", "", 6],
      ["rate_limits[2]", "token_bucket", "minute", 100, "tb", "", 7],
      ["quota", "quota", "month", 1000000, "q", "monthly", 8],
    ]);
    expect(limits[3].period).toBe("month");
    expect(rules.domains.get("d")!.ruleCount).toBe(1);
  });

  it("a quota alone, or next to rate_limit; several buckets get their unit in the key tag", () => {
    const rules = rulesOf(
      doc(
        [
          "  - key: a",
          "    quota: {period: day, limit: 50}",
          "  - key: b",
          "    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket}",
          "    quota: {period: month, limit: 0}",
          "  - key: c",
          "    rate_limits:",
          "      - {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 5}",
          "      - {unit: hour, requests_per_unit: 100, algorithm: token_bucket}",
        ].join("\n"),
      ),
    );
    expect(find(rules, "d", [["a", "x"]])!.node.limits.map((l) => [l.algorithm, l.period, l.requestsPerUnit])).toEqual([["quota", "day", 50]]);
    expect(find(rules, "d", [["b", "x"]])!.node.limits.map((l) => l.keyTag)).toEqual(["tb", "q"]);
    expect(find(rules, "d", [["c", "x"]])!.node.limits.map((l) => l.keyTag)).toEqual(["tb1", "tb3600"]);
  });

  it("failure_mode: allow by default, set on the domain, inherited by children, overridden by a descriptor", () => {
    const rules = rulesOf(
      [
        "domain: d",
        "failure_mode: deny",
        "descriptors:",
        "  - key: a",
        "    rate_limit: {unit: second, requests_per_unit: 1}",
        "    descriptors:",
        "      - key: b",
        "        rate_limit: {unit: second, requests_per_unit: 1}",
        "  - key: login",
        "    failure_mode: local",
        "    descriptors:",
        "      - key: user",
        "        rate_limit: {unit: minute, requests_per_unit: 5}",
        "      - key: open",
        "        failure_mode: allow",
        "        rate_limit: {unit: minute, requests_per_unit: 5}",
      ].join("\n"),
    );
    const mode = (entries: [string, string][]) => find(rules, "d", entries)!.node.limits[0].failureMode;
    expect(mode([["a", "1"]])).toBe("deny");
    expect(
      mode([
        ["a", "1"],
        ["b", "2"],
      ]),
    ).toBe("deny");
    expect(
      mode([
        ["login", ""],
        ["user", "u"],
      ]),
    ).toBe("local");
    expect(
      mode([
        ["login", ""],
        ["open", "u"],
      ]),
    ).toBe("allow");
    expect(rules.domains.get("d")!.failureMode).toBe("deny");
    expect(rulesOf(doc("  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}")).domains.get("d")!.failureMode).toBe("allow");
  });

  it.each<[string, string, RuleError[]]>([
    [
      "rate_limit and rate_limits",
      "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n    rate_limits: [{unit: hour, requests_per_unit: 9}]",
      [err("r.yaml", 5, "d.a", "use either rate_limit or rate_limits, not both")],
    ],
    ["rate_limits not a list", "  - key: a\n    rate_limits: {unit: hour}", [err("r.yaml", 4, "d.a", "rate_limits must be a list of rate limits")]],
    ["rate_limits empty", "  - key: a\n    rate_limits: []", [err("r.yaml", 4, "d.a", "rate_limits must not be empty")]],
    [
      "unlimited in rate_limits",
      "  - key: a\n    rate_limits:\n      - {unlimited: true}",
      [err("r.yaml", 5, "d.a", "rate_limits entries cannot be unlimited (use rate_limit: {unlimited: true} alone)")],
    ],
    [
      "an error inside rate_limits",
      "  - key: a\n    rate_limits:\n      - {unit: hour, requests_per_unit: 1}\n      - {unit: week, requests_per_unit: x}",
      [err("r.yaml", 6, "d.a", "error checking config: 'requests_per_unit' must be an integer >= 0, got 'x'")],
    ],
    [
      "two fixed windows of one unit",
      "  - key: a\n    rate_limits:\n      - {unit: hour, requests_per_unit: 1}\n      - {unit: hour, requests_per_unit: 2}",
      [err("r.yaml", 6, "d.a", "rate_limits[0] and rate_limits[1] are both fixed_window per hour: keep the stricter one")],
    ],
    [
      "quota period missing and unknown key",
      "  - key: a\n    quota: {limit: 5, unit: day}",
      [err("r.yaml", 4, "d.a", "config error, unknown key 'unit'"), err("r.yaml", 4, "d.a", "quota period must be set (day or month)")],
    ],
    [
      "quota period week",
      "  - key: a\n    quota:\n      period: week\n      limit: 5",
      [err("r.yaml", 5, "d.a", "invalid quota period 'week' (expected day or month)")],
    ],
    ["quota limit missing", "  - key: a\n    quota: {period: day}", [err("r.yaml", 4, "d.a", "quota limit must be set")]],
    ["quota not a map", "  - key: a\n    quota: 100", [err("r.yaml", 4, "d.a", "quota must be a map with period and limit")]],
    [
      "unlimited with a quota",
      "  - key: a\n    rate_limit: {unlimited: true}\n    quota: {period: day, limit: 5}",
      [err("r.yaml", 5, "d.a", "an unlimited descriptor cannot have a quota")],
    ],
    [
      "bad failure_mode",
      "  - key: a\n    failure_mode: open\n    rate_limit: {unit: second, requests_per_unit: 1}",
      [err("r.yaml", 4, "d.a", "invalid failure_mode 'open' (expected allow, deny, local or error)")],
    ],
  ])("%s", (_name, descriptors, expected) => {
    expect(errorsOf(doc(descriptors))).toEqual(expected);
  });

  it("a bad domain failure_mode names the domain", () => {
    expect(errorsOf("domain: d\nfailure_mode: closed\n")).toEqual([
      err("r.yaml", 2, "d", "invalid failure_mode 'closed' (expected allow, deny, local or error)"),
    ]);
  });
});

describe("extension: approximate", () => {
  it("reads sync_interval_ms (100 by default) on any algorithm that may be approximate; absent means exact", () => {
    const rules = rulesOf(
      doc(
        [
          "  - key: a", //                                                                                  3
          "    rate_limit: {unit: minute, requests_per_unit: 300, approximate: {}}",
          "  - key: b",
          "    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket, burst: 10, approximate: {sync_interval_ms: 250}}",
          "  - key: c",
          "    rate_limits:",
          "      - {unit: minute, requests_per_unit: 60, algorithm: sliding_window, approximate: {sync_interval_ms: 10}}",
          "      - {unit: hour, requests_per_unit: 1000}",
          "  - key: z",
          "    rate_limit:",
          "      unit: second",
          "      requests_per_unit: 0",
          "      approximate:",
          "        sync_interval_ms: 10000",
        ].join("\n"),
      ),
    );
    expect(find(rules, "d", [["a", "1"]])!.node.limits[0]).toEqual({
      path: "d.a",
      label: "rate_limit",
      source: { file: "r.yaml", line: 3 },
      keyTag: "fw60",
      failureMode: "allow",
      unit: "minute",
      requestsPerUnit: 300,
      capacity: 300,
      algorithm: "fixed_window",
      unlimited: false,
      name: "",
      replaces: [],
      shadowMode: false,
      detailedMetric: false,
      valueToMetric: false,
      quotaMode: false,
      approximate: { syncIntervalMs: 100 },
    });
    const b = find(rules, "d", [["b", "x"]])!.node.limits[0];
    expect([b.algorithm, b.capacity, b.approximate]).toEqual(["token_bucket", 10, { syncIntervalMs: 250 }]);
    const c = find(rules, "d", [["c", "x"]])!.node.limits;
    expect(c.map((l) => [l.algorithm, l.approximate])).toEqual([
      ["sliding_window", { syncIntervalMs: 10 }],
      ["fixed_window", undefined],
    ]);
    expect(Object.hasOwn(c[1], "approximate")).toBe(false);
    expect(find(rules, "d", [["z", "x"]])!.node.limits[0].approximate).toEqual({ syncIntervalMs: 10000 });
  });

  const rl = (approximate: string) => `  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 3\n      approximate: ${approximate}`;
  it.each<[string, string, RuleError[]]>([
    [
      "interval 5",
      rl("{sync_interval_ms: 5}"),
      [err("r.yaml", 7, "d.a", "error checking config: 'sync_interval_ms' must be an integer from 10 to 10000, got 5")],
    ],
    [
      "interval 10001",
      rl("{sync_interval_ms: 10001}"),
      [err("r.yaml", 7, "d.a", "error checking config: 'sync_interval_ms' must be an integer from 10 to 10000, got 10001")],
    ],
    [
      "interval 1.5, on a line of its own",
      rl("\n        sync_interval_ms: 1.5"),
      [err("r.yaml", 8, "d.a", "error checking config: 'sync_interval_ms' must be an integer from 10 to 10000, got 1.5")],
    ],
    ["a list", rl("[100]"), [err("r.yaml", 7, "d.a", "approximate must be a map with sync_interval_ms")]],
    ["a number", rl("100"), [err("r.yaml", 7, "d.a", "approximate must be a map with sync_interval_ms")]],
    ["left empty", rl(""), [err("r.yaml", 7, "d.a", "approximate must be a map with sync_interval_ms")]],
    ["unknown key", rl("{interval_ms: 100}"), [err("r.yaml", 7, "d.a", "config error, unknown key 'interval_ms'")]],
    [
      "with unlimited",
      "  - key: a\n    rate_limit:\n      unlimited: true\n      approximate: {sync_interval_ms: 50}",
      [err("r.yaml", 6, "d.a", "should not specify approximate when unlimited")],
    ],
    [
      "in a rate_limits entry",
      "  - key: a\n    rate_limits:\n      - {unit: hour, requests_per_unit: 1}\n      - {unit: day, requests_per_unit: 9, approximate: {sync_interval_ms: 0}}",
      [err("r.yaml", 6, "d.a", "error checking config: 'sync_interval_ms' must be an integer from 10 to 10000, got 0")],
    ],
    [
      "in a quota (a quota is exact)",
      "  - key: a\n    quota: {period: day, limit: 5, approximate: {}}",
      [err("r.yaml", 4, "d.a", "config error, unknown key 'approximate'")],
    ],
  ])("%s", (_name, descriptors, expected) => {
    expect(errorsOf(doc(descriptors))).toEqual(expected);
  });

  it("is refused on an algorithm whose rule spec says it cannot be approximate", () => {
    const spec = algorithm("token_bucket").rule;
    spec.approximate = false;
    try {
      expect(
        errorsOf(doc("  - key: a\n    rate_limit:\n      algorithm: token_bucket\n      unit: second\n      requests_per_unit: 3\n      approximate: {}")),
      ).toEqual([err("r.yaml", 8, "d.a", "approximate cannot be used with algorithm token_bucket")]);
    } finally {
      spec.approximate = true;
    }
  });
});
