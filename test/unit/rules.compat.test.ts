// The envoyproxy/ratelimit fixtures: outcomes from /work/shared/compat/envoyproxy-ratelimit/README.md.
import { COMPAT_DIR } from "../helpers/compat.js";
import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadRuleFiles } from "../../src/rules/load.js";
import { matchLimit } from "../../src/rules/match.js";
import type { RuleError, RuleSet, Unit } from "../../src/rules/model.js";

const COMPAT = COMPAT_DIR;

/** Files are named as given (e.g. "basic_config.yaml"), like the reference's unit tests. */
function load(names: string[], mergeDomains = false, dir = "config") {
  const files = names.map((name) => ({ name, text: readFileSync(join(COMPAT, dir, name), "utf8") }));
  return loadRuleFiles(files, { mergeDomains });
}

function rulesOf(names: string[], mergeDomains = false, dir = "config"): RuleSet {
  const r = load(names, mergeDomains, dir);
  expect(r.errors).toEqual([]);
  expect(r.rules).toBeDefined();
  return r.rules!;
}

type Entries = [string, string][];

function match(rules: RuleSet, domain: string, entries: Entries) {
  const d = rules.domains.get(domain);
  if (!d) return undefined;
  return matchLimit(
    d.root,
    entries.map(([key, value]) => ({ key, value })),
  );
}

interface Expected {
  rpu: number;
  unit: Unit;
  path: string;
  name?: string;
  shadow?: boolean;
  unlimited?: boolean;
}

function resolve(rules: RuleSet, domain: string, entries: Entries) {
  const m = match(rules, domain, entries);
  if (!m) return null;
  const l = m.node.limits[0];
  return { rpu: l.requestsPerUnit, unit: l.unit, path: l.path, name: l.name, shadow: l.shadowMode, unlimited: l.unlimited };
}

function expectLimit(rules: RuleSet, domain: string, entries: Entries, e: Expected | null): void {
  const want = e && { name: "", shadow: false, unlimited: false, ...e };
  expect(resolve(rules, domain, entries)).toEqual(want);
}

const err = (file: string, line: number, path: string, message: string): RuleError => ({ file, line, path, message });

describe("reference-rejected files", () => {
  const cases: [string, string[], boolean, RuleError[]][] = [
    ["empty_domain", ["empty_domain.yaml"], false, [err("empty_domain.yaml", 1, "", "config file cannot have empty domain")]],
    [
      "duplicate_domain",
      ["basic_config.yaml", "duplicate_domain.yaml"],
      false,
      [err("duplicate_domain.yaml", 1, "test-domain", "duplicate domain 'test-domain' in config file (also in basic_config.yaml)")],
    ],
    ["empty_key", ["empty_key.yaml"], false, [err("empty_key.yaml", 3, "test-domain", "descriptor has empty key")]],
    [
      "duplicate_key",
      ["duplicate_key.yaml"],
      false,
      [err("duplicate_key.yaml", 6, "test-domain.key1_value1", "duplicate descriptor composite key 'test-domain.key1_value1'")],
    ],
    [
      "merge twice",
      ["merge_domain_key1.yaml", "merge_domain_key1.yaml"],
      true,
      [err("merge_domain_key1.yaml", 5, "test-domain.key1_value1", "duplicate descriptor composite key 'test-domain.key1_value1'")],
    ],
    ["bad_limit_unit", ["bad_limit_unit.yaml"], false, [err("bad_limit_unit.yaml", 6, "test-domain.key1_value1", "invalid rate limit unit 'foo'")]],
    [
      "replaces_self",
      ["replaces_self.yaml"],
      false,
      [err("replaces_self.yaml", 10, "test-domain.key1_value1.subkey1", "replaces should not contain name of same descriptor")],
    ],
    [
      "replaces_empty",
      ["replaces_empty.yaml"],
      false,
      [err("replaces_empty.yaml", 10, "test-domain.key1_value1.subkey1", "should not have an empty replaces entry")],
    ],
    ["misspelled_key", ["misspelled_key.yaml"], false, [err("misspelled_key.yaml", 5, "test-domain.key1_value1", "config error, unknown key 'ratelimit'")]],
    [
      "misspelled_key2",
      ["misspelled_key2.yaml"],
      false,
      [
        err("misspelled_key2.yaml", 5, "test-domain.key1_value1", "requests_per_unit must be set (use 0 to block all requests)"),
        err("misspelled_key2.yaml", 7, "test-domain.key1_value1", "config error, unknown key 'requestsperunit'"),
      ],
    ],
    [
      "non_string_key",
      ["non_string_key.yaml"],
      false,
      [
        err("non_string_key.yaml", 1, "", "config error, key is not of type string: 0.25"),
        err("non_string_key.yaml", 1, "", "config file cannot have empty domain"),
      ],
    ],
    [
      "non_map_list",
      ["non_map_list.yaml"],
      false,
      [
        err("non_map_list.yaml", 3, "test-domain", "config error, yaml file contains list of type other than map: a"),
        err("non_map_list.yaml", 4, "test-domain", "config error, yaml file contains list of type other than map: b"),
        err("non_map_list.yaml", 5, "test-domain", "config error, yaml file contains list of type other than map: c"),
      ],
    ],
    [
      "unlimited_with_unit",
      ["unlimited_with_unit.yaml"],
      false,
      [
        err("unlimited_with_unit.yaml", 6, "test-domain.foo", "should not specify rate limit unit when unlimited"),
        err("unlimited_with_unit.yaml", 7, "test-domain.foo", "should not specify requests_per_unit when unlimited"),
      ],
    ],
  ];

  it.each(cases)("%s", (_name, files, merge, expected) => {
    const r = load(files, merge);
    expect(r.rules).toBeUndefined();
    expect(r.errors).toEqual(expected);
  });

  it("bad_yaml: parser error with the reference prefix, file and line", () => {
    const r = load(["bad_yaml.yaml"]);
    expect(r.rules).toBeUndefined();
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toEqual({
      file: "bad_yaml.yaml",
      line: 2,
      path: "",
      message: expect.stringMatching(/^error loading config file: Missing closing 'quote/),
    });
  });
});

describe("basic_config.yaml", () => {
  const rules = rulesOf(["basic_config.yaml"]);
  const d = "test-domain";

  it("counts limits and files", () => {
    expect(rules.domains.get(d)!.ruleCount).toBe(10);
    expect(rules.domains.get(d)!.files).toEqual(["basic_config.yaml"]);
  });

  it("unknown domain and empty descriptor give no limit", () => {
    expect(rules.domains.get("foo_domain")).toBeUndefined();
    expect(match(rules, d, [])).toBeUndefined();
  });

  it.each<[Entries, Expected | null]>([
    [[["key1", "something"]], null],
    [[["key1", "value1"]], null],
    [
      [
        ["key2", "value2"],
        ["subkey", "subvalue"],
      ],
      null,
    ],
    [
      [
        ["key5", "value5"],
        ["subkey5", "subvalue"],
      ],
      null,
    ],
    [
      [
        ["key1", "value1"],
        ["subkey1", "something"],
      ],
      { rpu: 5, unit: "second", path: "test-domain.key1_value1.subkey1" },
    ],
    [
      [
        ["key1", "value1"],
        ["subkey1", "subvalue1"],
      ],
      { rpu: 10, unit: "second", path: "test-domain.key1_value1.subkey1_subvalue1" },
    ],
    [[["key2", "something"]], { rpu: 20, unit: "minute", path: "test-domain.key2" }],
    [[["key2", "value2"]], { rpu: 30, unit: "minute", path: "test-domain.key2_value2" }],
    [[["key2", "value3"]], null],
    [[["key3", "foo"]], { rpu: 1, unit: "hour", path: "test-domain.key3", name: "" }],
    [[["key4", "foo"]], { rpu: 1, unit: "day", path: "test-domain.key4", name: "key4_rate_limit" }],
    [[["key5", "value5"]], { rpu: 15, unit: "day", path: "test-domain.key5_value5" }],
    [
      [
        ["key5", "value5"],
        ["subkey5", "subvalue5"],
      ],
      { rpu: 25, unit: "day", path: "test-domain.key5_value5.subkey5_subvalue5" },
    ],
    // unlimited: no count; unit is a placeholder the limiter never reads
    [[["key6", "foo"]], { rpu: 0, unit: "second", path: "test-domain.key6", unlimited: true }],
    // detailed_metric turns the stats key into test-domain.key7_<value> at request time (statsd-names.test.ts)
    [[["key7", "unspecified_value"]], { rpu: 70, unit: "minute", path: "test-domain.key7" }],
    [[["key7", "another_value"]], { rpu: 70, unit: "minute", path: "test-domain.key7" }],
  ])("%j", (entries, expected) => {
    expectLimit(rules, d, entries, expected);
  });

  it("keeps the detailed_metric flag and the source of the descriptor's key", () => {
    const m = match(rules, d, [["key7", "x"]])!;
    expect(m.node.limits[0].detailedMetric).toBe(true);
    expect(m.node.limits[0].source).toEqual({ file: "basic_config.yaml", line: 67 });
    expect(m.node.detailedMetric).toBe(true);
    const sub = match(rules, d, [
      ["key1", "value1"],
      ["subkey1", "subvalue1"],
    ])!;
    expect(sub.node.limits[0].source).toEqual({ file: "basic_config.yaml", line: 15 });
    expect(sub.nodes.map((n) => [n.key, n.value])).toEqual([
      ["key1", "value1"],
      ["subkey1", "subvalue1"],
    ]);
    expect(sub.node).toBe(sub.nodes[1]);
  });
});

describe("merge_domain_key1.yaml + merge_domain_key2.yaml", () => {
  it("merge=true merges the descriptor lists", () => {
    const rules = rulesOf(["merge_domain_key1.yaml", "merge_domain_key2.yaml"], true);
    const dom = rules.domains.get("test-domain")!;
    expect(dom.files).toEqual(["merge_domain_key1.yaml", "merge_domain_key2.yaml"]);
    expect(dom.ruleCount).toBe(2);
    expectLimit(rules, "test-domain", [["key1", "value1"]], { rpu: 10, unit: "minute", path: "test-domain.key1_value1" });
    expectLimit(rules, "test-domain", [["key2", "value2"]], { rpu: 20, unit: "minute", path: "test-domain.key2_value2" });
    expect(rules.domains.get("foo_domain")).toBeUndefined();
    expect(match(rules, "test-domain", [])).toBeUndefined();
  });

  it("merge=false rejects the second file", () => {
    const r = load(["merge_domain_key1.yaml", "merge_domain_key2.yaml"]);
    expect(r.rules).toBeUndefined();
    expect(r.errors).toEqual([
      err("merge_domain_key2.yaml", 2, "test-domain", "duplicate domain 'test-domain' in config file (also in merge_domain_key1.yaml)"),
    ]);
  });
});

describe("shadowmode_config.yaml", () => {
  const rules = rulesOf(["shadowmode_config.yaml"]);
  it.each<[Entries, Expected]>([
    [
      [
        ["key1", "value1"],
        ["subkey1", "something"],
      ],
      { rpu: 5, unit: "second", path: "test-domain.key1_value1.subkey1", shadow: false },
    ],
    [
      [
        ["key1", "value1"],
        ["subkey1", "subvalue1"],
      ],
      { rpu: 10, unit: "second", path: "test-domain.key1_value1.subkey1_subvalue1", shadow: true },
    ],
    [[["key2", "something"]], { rpu: 20, unit: "minute", path: "test-domain.key2", shadow: true }],
    [[["key2", "value2"]], { rpu: 30, unit: "minute", path: "test-domain.key2_value2", shadow: false }],
  ])("%j", (entries, expected) => {
    expectLimit(rules, "test-domain", entries, expected);
  });
});

describe("wildcard.yaml", () => {
  const rules = rulesOf(["wildcard.yaml"]);
  const d = "test-domain";
  const min = (rpu: number, path: string): Expected => ({ rpu, unit: "minute", path });

  it.each<[Entries, Expected | null]>([
    [[["noVal", "foo1"]], min(20, "test-domain.noVal")],
    [[["wild", "foo1"]], min(20, "test-domain.wild_foo*")],
    [[["wild", "foo"]], min(20, "test-domain.wild_foo*")],
    [
      [
        ["nestedWild", "val1"],
        ["wild", "goo2"],
      ],
      min(20, "test-domain.nestedWild_val1.wild_goo*"),
    ],
    [[["wild", "bar"]], null],
    [[["noWild", "foo1"]], null],
    [[["midWild", "barab"]], min(20, "test-domain.midWild_bar*b")],
    [[["midWild", "bar123b"]], min(20, "test-domain.midWild_bar*b")],
    [[["midWild", "barb"]], min(20, "test-domain.midWild_bar*b")],
    [[["midWild", "bara"]], null],
    [[["midWild", "xbarb"]], null],
    [[["multiWild", "foo123bar456baz"]], min(10, "test-domain.multiWild_foo*bar*baz")],
    [[["multiWild", "foobarbaz"]], min(10, "test-domain.multiWild_foo*bar*baz")],
    [[["multiWild", "foo123baz"]], null],
    [[["multiWild", "bar456baz"]], null],
  ])("%j", (entries, expected) => {
    expectLimit(rules, d, entries, expected);
  });

  it("different values of one rule share the same limit object", () => {
    expect(match(rules, d, [["noVal", "foo1"]])!.node.limits[0]).toBe(match(rules, d, [["noVal", "foo2"]])!.node.limits[0]);
    expect(match(rules, d, [["wild", "foo1"]])!.node.limits[0]).toBe(match(rules, d, [["wild", "foo2"]])!.node.limits[0]);
  });
});

describe("share_threshold.yaml", () => {
  const rules = rulesOf(["share_threshold.yaml"]);
  const d = "test-domain";
  /** The reference's ShareThresholdKeyPattern: the pattern where the matched node shares, else "". */
  const patterns = (entries: Entries) => match(rules, d, entries)?.nodes.map((n) => (n.shareThreshold ? n.value : ""));
  const min = (rpu: number, path: string): Expected => ({ rpu, unit: "minute", path });

  it.each<[Entries, string[] | undefined, Expected | null]>([
    [[["files", "files/a.pdf"]], ["files/*"], min(100, "test-domain.files_files/*")],
    [[["files", "files/b.csv"]], ["files/*"], min(100, "test-domain.files_files/*")],
    [[["files", "files/c.txt"]], ["files/*"], min(100, "test-domain.files_files/*")],
    [
      [
        ["route", "api/v1"],
        ["method", "GET"],
      ],
      ["api/*", ""],
      min(60, "test-domain.route_api/*.method"),
    ],
    // detailed_metric makes the stats key ...endpoint_get at request time (statsd-names.test.ts)
    [
      [
        ["service", "svc/user"],
        ["endpoint", "get"],
      ],
      ["svc/*", ""],
      min(80, "test-domain.service_svc/*.endpoint"),
    ],
    [
      [
        ["nested", "parent"],
        ["files", "nested/file1.txt"],
      ],
      ["", "nested/*"],
      min(200, "test-domain.nested_parent.files_nested/*"),
    ],
    [
      [
        ["files", "top/file1.txt"],
        ["files", "nested/file1.txt"],
      ],
      ["top/*", "nested/*"],
      min(300, "test-domain.files_top/*.files_nested/*"),
    ],
    [
      [
        ["path", "path/foo"],
        ["file", "file/doc1"],
        ["type", "pdf"],
      ],
      ["path/*", "", ""],
      min(120, "test-domain.path_path/*.file_file/*.type"),
    ],
    [
      [
        ["user", "user/alice"],
        ["resource", "res/file1"],
        ["action", "read"],
      ],
      ["user/*", "res/*", ""],
      min(150, "test-domain.user_user/*.resource_res/*.action"),
    ],
    [[["file", "test1"]], [""], min(50, "test-domain.file_test1")],
    [[["file", "test2"]], ["test*"], min(100, "test-domain.file_test*")],
    [[["file", "test23"]], ["test*"], min(100, "test-domain.file_test*")],
    [[["file", "test123"]], ["test*"], min(100, "test-domain.file_test*")],
    [[["midpath", "/api/v1"]], ["/api*v1"], min(100, "test-domain.midpath_/api*v1")],
    [[["midpath", "/api/v2"]], undefined, null],
    [[["multiroute", "svcXepYrpc"]], ["svc*ep*rpc"], min(50, "test-domain.multiroute_svc*ep*rpc")],
    [[["multiroute", "svcABCrpc"]], undefined, null],
    [[["midroute", "/api/v2"]], ["/api*v2"], min(80, "test-domain.midroute_/api*v2")],
    [[["midroute", "/api-beta-v2"]], ["/api*v2"], min(80, "test-domain.midroute_/api*v2")],
    [
      [
        ["tenant", "t1prod"],
        ["resource", "resAv2"],
      ],
      ["t*prod", "res*v2"],
      min(60, "test-domain.tenant_t*prod.resource_res*v2"),
    ],
    [
      [
        ["tenant", "t99prod"],
        ["resource", "resBBBv2"],
      ],
      ["t*prod", "res*v2"],
      min(60, "test-domain.tenant_t*prod.resource_res*v2"),
    ],
    // top/* alone carries no limit
    [[["files", "top/file1.txt"]], undefined, null],
  ])("%j", (entries, pattern, expected) => {
    expectLimit(rules, d, entries, expected);
    expect(patterns(entries)).toEqual(pattern);
  });

  it("keeps the flags", () => {
    expect(
      match(rules, d, [
        ["service", "svc/user"],
        ["endpoint", "get"],
      ])!.node.limits[0].detailedMetric,
    ).toBe(true);
    expect(match(rules, d, [["midroute", "/api/v2"]])!.node.limits[0].valueToMetric).toBe(true);
    expect(rules.domains.get(d)!.ruleCount).toBe(13);
  });
});

describe("metadata.yaml", () => {
  const rules = rulesOf(["metadata.yaml"]);
  it("returns the metadata of the matched limit", () => {
    const a = match(rules, "test-domain", [
      ["key1", "value1"],
      ["subkey1", "something"],
    ])!.node.limits[0];
    const aNode = match(rules, "test-domain", [
      ["key1", "value1"],
      ["subkey1", "something"],
    ])!.node;
    expect([a.requestsPerUnit, a.unit, aNode.metadata]).toEqual([5, "second", { name: "service_1" }]);
    const b = match(rules, "test-domain", [["key2", "something"]])!.node.limits[0];
    const bNode = match(rules, "test-domain", [["key2", "something"]])!.node;
    expect([b.requestsPerUnit, b.unit, bNode.metadata]).toEqual([20, "minute", { service_with_quota: { name: "service_2" } }]);
    expect(
      match(rules, "test-domain", [
        ["key1", "value1"],
        ["subkey1", "subvalue1"],
      ])!.node.metadata,
    ).toBeUndefined();
  });
});

describe("derived/*.yaml", () => {
  const derived = (name: string, merge = false) => rulesOf([name], merge, "derived");
  const min = (rpu: number, path: string): Expected => ({ rpu, unit: "minute", path });
  const sec = (rpu: number, path: string): Expected => ({ rpu, unit: "second", path });

  // Paths are the static rule paths; detailed_metric / value_to_metric reshape stats keys per request (statsd-names.test.ts).
  const cases: [file: string, domain: string, entries: Entries, expected: Expected | null][] = [
    ["detailed_metric_two_level.yaml", "nested", [["key-1", "value-1"]], min(100, "nested.key-1")],
    [
      "detailed_metric_two_level.yaml",
      "nested",
      [
        ["key-1", "value-1"],
        ["key-2", "value-2"],
      ],
      min(5, "nested.key-1.key-2"),
    ],
    ["detailed_metric_realistic.yaml", "nested", [["key_1", "value-for-key-1"]], min(500, "nested.key_1")],
    ["detailed_metric_realistic.yaml", "nested", [["key_1", "some-value-for-key-1"]], min(500, "nested.key_1_some-value-for-key-1")],
    ["detailed_metric_realistic.yaml", "nested", [["key_2", "key-2-value"]], min(5000, "nested.key_2")],
    [
      "detailed_metric_realistic.yaml",
      "nested",
      [
        ["key_2", "key-2-value"],
        ["key_3", "requested-key3-value"],
      ],
      min(5, "nested.key_2.key_3_requested-key3-value"),
    ],
    [
      "detailed_metric_realistic.yaml",
      "nested",
      [
        ["key_2", "key-2-value"],
        ["key_3", "other"],
      ],
      null,
    ],
    ["detailed_metric_realistic.yaml", "nested", [["key_2", "specific-id"]], min(50000, "nested.key_2_specific-id")],
    [
      "detailed_metric_realistic.yaml",
      "nested",
      [
        ["key_2", "specific-id"],
        ["key_3", "requested-key3-value"],
      ],
      min(100, "nested.key_2_specific-id.key_3_requested-key3-value"),
    ],
    [
      "value_to_metric_three_level.yaml",
      "domain",
      [
        ["route", "draw"],
        ["http_method", "GET"],
        ["subject_id", "123"],
      ],
      min(60, "domain.route.http_method.subject_id"),
    ],
    [
      "value_to_metric_three_level.yaml",
      "domain",
      [
        ["route", ""],
        ["http_method", "GET"],
        ["subject_id", "123"],
      ],
      min(60, "domain.route.http_method.subject_id"),
    ],
    [
      "value_to_metric_three_level.yaml",
      "domain",
      [
        ["route", "draw"],
        ["http_method", ""],
        ["subject_id", "123"],
      ],
      min(60, "domain.route.http_method.subject_id"),
    ],
    [
      "value_to_metric_three_level.yaml",
      "domain",
      [
        ["route", ""],
        ["http_method", ""],
        ["subject_id", "123"],
      ],
      min(60, "domain.route.http_method.subject_id"),
    ],
    [
      "value_to_metric_detailed_leaf.yaml",
      "domain",
      [
        ["route", "draw"],
        ["http_method", "GET"],
        ["subject_id", "123"],
      ],
      min(60, "domain.route.http_method.subject_id"),
    ],
    [
      "value_to_metric_default_key.yaml",
      "d",
      [
        ["k1", "A"],
        ["k2", "foo"],
      ],
      sec(1, "d.k1.k2"),
    ],
    [
      "value_to_metric_mid_level.yaml",
      "d",
      [
        ["k1", "X"],
        ["k2", "Y"],
        ["k3", "Z"],
      ],
      sec(1, "d.k1.k2.k3"),
    ],
    [
      "value_to_metric_mid_level.yaml",
      "d",
      [
        ["k1", "X"],
        ["k2", "Y"],
      ],
      null,
    ],
    [
      "value_to_metric_configured_values.yaml",
      "test-domain",
      [
        ["route", "api"],
        ["http_method", "GET"],
        ["subject_id", "user123"],
      ],
      min(60, "test-domain.route.http_method_GET.subject_id"),
    ],
    [
      "value_to_metric_configured_values.yaml",
      "test-domain",
      [
        ["route", "api"],
        ["http_method", "POST"],
        ["subject_id", "user456"],
      ],
      min(30, "test-domain.route.http_method_POST.subject_id"),
    ],
    [
      "value_to_metric_configured_values.yaml",
      "test-domain",
      [
        ["route", "api"],
        ["http_method", "PUT"],
        ["subject_id", "u"],
      ],
      null,
    ],
    [
      "value_to_metric_wildcard.yaml",
      "domain",
      [
        ["user", "alice"],
        ["action", "readfile"],
        ["resource", "documents"],
      ],
      min(100, "domain.user.action_read*.resource"),
    ],
    [
      "value_to_metric_wildcard.yaml",
      "domain",
      [
        ["user", "bob"],
        ["action", "readdata"],
        ["resource", "database"],
      ],
      min(100, "domain.user.action_read*.resource"),
    ],
    [
      "value_to_metric_wildcard.yaml",
      "domain",
      [
        ["user", "bob"],
        ["action", "write"],
        ["resource", "database"],
      ],
      null,
    ],
    [
      "wildcard_stats_nested_vtm.yaml",
      "test-domain",
      [
        ["wild", "foo1"],
        ["other", "bar"],
        ["limit", "X"],
      ],
      min(20, "test-domain.wild_foo*.other.limit"),
    ],
  ];

  it.each(cases)("%s %s %j", (file, domain, entries, expected) => {
    expectLimit(derived(file, file === "detailed_metric_realistic.yaml"), domain, entries, expected);
  });

  it("keeps value_to_metric on nodes without limits", () => {
    const m = match(derived("value_to_metric_three_level.yaml"), "domain", [
      ["route", "draw"],
      ["http_method", "GET"],
      ["subject_id", "1"],
    ])!;
    expect(m.nodes.map((n) => n.valueToMetric)).toEqual([true, true, false]);
  });

  it("xds_initial_snapshot.yaml, split into its documents", () => {
    const text = readFileSync(join(COMPAT, "derived", "xds_initial_snapshot.yaml"), "utf8");
    const docs = text
      .split(/^---$/m)
      .slice(1)
      .map((t, i) => ({ name: `xds-${i + 1}.yaml`, text: t }));
    const r = loadRuleFiles(docs, { mergeDomains: false });
    expect(r.errors).toEqual([]);
    const rules = r.rules!;
    expect([...rules.domains.keys()]).toEqual(["basic", "another"]);
    expectLimit(rules, "basic", [["key1", "x"]], sec(50, "basic.key1"));
    expectLimit(rules, "basic", [["one_per_minute", "x"]], min(1, "basic.one_per_minute"));
    expectLimit(rules, "another", [["key3", "x"]], { rpu: 10, unit: "hour", path: "another.key3" });
    expectLimit(rules, "another", [["key4_local", "x"]], { rpu: 20, unit: "day", path: "another.key4_local" });
  });
});

describe("examples/ratelimit/config", () => {
  const rules = rulesOf(["config.yaml", "example.yaml"], false, "examples/ratelimit/config");
  const min = (rpu: number, path: string, more: Partial<Expected> = {}): Expected => ({ rpu, unit: "minute", path, ...more });

  it.each<[string, Entries, Expected | null]>([
    ["mongo_cps", [["database", "users"]], { rpu: 500, unit: "second", path: "mongo_cps.database_users" }],
    ["mongo_cps", [["database", "other"]], null],
    ["rl", [["category", "account"]], min(4, "rl.category_account")],
    [
      "rl",
      [
        ["source_cluster", "proxy"],
        ["destination_cluster", "bkthomps"],
      ],
      min(2, "rl.source_cluster_proxy.destination_cluster_bkthomps"),
    ],
    [
      "rl",
      [
        ["source_cluster", "proxy"],
        ["destination_cluster", "fake"],
      ],
      min(2, "rl.source_cluster_proxy.destination_cluster_fake", { name: "fake_name" }),
    ],
    ["rl", [["foo", "x"]], min(2, "rl.foo")],
    [
      "rl",
      [
        ["foo", "x"],
        ["bar", "y"],
      ],
      min(3, "rl.foo.bar"),
    ],
    [
      "rl",
      [
        ["foo", "x"],
        ["bar", "banned"],
      ],
      min(0, "rl.foo.bar_banned", { name: "banned_limit" }),
    ],
    [
      "rl",
      [
        ["foo", "x"],
        ["baz", "shady"],
      ],
      min(3, "rl.foo.baz_shady", { shadow: true }),
    ],
    [
      "rl",
      [
        ["foo", "x"],
        ["baz", "other"],
      ],
      { rpu: 1, unit: "second", path: "rl.foo.baz" },
    ],
    [
      "rl",
      [
        ["foo", "x"],
        ["bay", "y"],
      ],
      { rpu: 0, unit: "second", path: "rl.foo.bay", unlimited: true },
    ],
    ["rl", [["qux", "y"]], { rpu: 0, unit: "second", path: "rl.qux", unlimited: true }],
  ])("%s %j", (domain, entries, expected) => {
    expectLimit(rules, domain, entries, expected);
  });

  it("keeps replaces, quota_mode and metadata", () => {
    expect(match(rules, "rl", [["category", "account"]])!.node.limits[0].replaces).toEqual(["bkthomps", "fake_name"]);
    const s = match(rules, "rl", [["service", "service_2"]])!.node.limits[0];
    const sNode = match(rules, "rl", [["service", "service_2"]])!.node;
    expect([s.requestsPerUnit, s.quotaMode, sNode.metadata]).toEqual([2, true, { service_with_quota: { name: "service_2" } }]);
    expect(rules.domains.get("rl")!.ruleCount).toBe(17);
  });
});
