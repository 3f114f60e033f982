// `sluice explain` through the real CLI: golden files for the shipped config/ and a fixture with every
// kind of limit, plus usage and load errors. UPDATE_GOLDEN=1 rewrites the golden files.
import { SecretValues } from "../../src/core/secret.js";
import { SETTINGS } from "../../src/core/settings-table.js";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseDescriptorArg } from "../../src/inspect/explain.js";
import { ROOT, ruleDir, runCli } from "../helpers/sluice.js";

const GOLDEN = path.join(ROOT, "test/golden");

function golden(name: string, args: string[]): string {
  const r = runCli(["explain", ...args]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  const file = path.join(GOLDEN, name);
  if (process.env.UPDATE_GOLDEN === "1") fs.writeFileSync(file, r.stdout);
  expect(r.stdout).toBe(fs.readFileSync(file, "utf8"));
  return r.stdout;
}

/** A secret key's value as store keys hold it under the default hash key (SLUICE_TOP_HASH_KEY unset). */
const hashed = (value: string) => new SecretValues(["api_key"], SETTINGS.TOP_HASH_KEY.default).inKey(value);

/** The block of one descriptor in explain's output. */
function block(out: string, n: number): string {
  return out.split("\n\n").find((b) => b.startsWith(`descriptor ${n}: `)) ?? "";
}

describe("sluice explain on the shipped config/", () => {
  it("names the rule, its file and line, and the key of each layer of the edge rules", () => {
    const out = golden("explain-edge.txt", [
      "--config",
      "config",
      "--domain",
      "edge",
      "--descriptor",
      "remote_address=203.0.113.7",
      "--descriptor",
      "account=alice",
      "--descriptor",
      "api_key=k-123",
      "--descriptor",
      "login_account=bob@example.com",
      "--descriptor",
      "generic_key=search",
    ]);
    expect(out.split("\n")[0]).toBe("domain edge: config/edge.yaml (failure_mode allow unless a descriptor says otherwise)");
    const expected: [string, string][] = [
      ["edge.remote_address (config/edge.yaml:9)", "sluice:{edge:remote_address=203.0.113.7}:fw60"],
      ["edge.account (config/edge.yaml:17)", "sluice:{edge:account=alice}:fw60"],
      // api_key is a secret key (SLUICE_TOP_SECRET_KEYS' default): its value is in the key as its keyed hash.
      ["edge.api_key (config/edge.yaml:25)", `sluice:{edge:api_key=${hashed("k-123")}}:tb`],
      ["edge.login_account (config/edge.yaml:61)", "sluice:{edge:login_account=bob@example.com}:fw60"],
      ["edge.generic_key_search (config/edge.yaml:70)", "sluice:{edge:generic_key=search}:fw60"],
    ];
    expected.forEach(([rule, key], i) => {
      const b = block(out, i + 1);
      expect(b).toContain(`\n  rule: ${rule}\n`);
      expect(b).toContain(`\n      key: ${key}`);
    });
    expect(block(out, 3)).toContain("rate_limit: 2 per second, token_bucket, burst 20, failure_mode allow");
    // A plan: its rate limit replaces the key's bucket, and its quota's key names the month (of --at).
    const both = ["--config", "config", "--domain", "edge", "--descriptor", "api_key=k-9", "--descriptor", "api_key=k-9,plan=pro"];
    const planOut = runCli(["explain", ...both, "--at", "2026-10-31T23:59:00Z"]).stdout;
    expect(block(planOut, 1)).toContain("not checked: replaced by a limit of descriptor 2 (replaces name 'per_api_key')");
    const plan = block(planOut, 2);
    expect(plan).toContain("\n  rule: edge.api_key.plan_pro (config/edge.yaml:");
    expect(plan).toContain(`\n      key: sluice:{edge:api_key=${hashed("k-9")}|plan=pro}:fw1`);
    expect(plan).toContain(`\n      key: sluice:{edge:api_key=${hashed("k-9")}|plan=pro}:q:2026-10`);
  });

  it("says why nothing matched", () => {
    const out = golden("explain-edge-no-match.txt", [
      "--config",
      "config",
      "--domain",
      "edge",
      "--descriptor",
      "generic_key=checkout",
      "--descriptor",
      "path=/x",
      "--descriptor",
      "remote_address=203.0.113.7,path=/x",
    ]);
    expect(block(out, 1)).toContain("no descriptor for value 'checkout' of key 'generic_key' at the top of domain edge (values there: 'search')");
    expect(block(out, 2)).toContain(
      "no descriptor with key 'path' at the top of domain edge (keys there: account, api_key, generic_key, login_account, remote_address)",
    );
    expect(block(out, 3)).toContain("sluice does not fall back to the shorter rule edge.remote_address (config/edge.yaml:9)");
    expect(runCli(["explain", "--domain", "other", "--descriptor", "a=b"]).stdout).toBe(
      "domain 'other' is not in the rules (domains: 'edge'): sluice answers OK to every descriptor of it\n",
    );
  });
});

describe("sluice explain on every kind of limit", () => {
  it("shows several limits, quotas at --at, shared counters, unlimited, blocked, replaced, hashed long values", () => {
    const out = golden("explain-shop.txt", [
      "--config",
      "test/fixtures/explain",
      "--domain",
      "shop",
      "--at",
      "2026-10-31T23:59:30Z",
      "--descriptor",
      "tenant=acme,plan=pro",
      "--descriptor",
      "tenant=acme,plan=free",
      "--descriptor",
      "tenant=acme",
      "--descriptor",
      "path=/api/v1/users",
      "--descriptor",
      "path=/static/app.js",
      "--descriptor",
      "login=bob",
      "--descriptor",
      "login_vip=bob",
      "--descriptor",
      "maintenance=on",
      "--descriptor",
      "experiment=variant-b",
      "--descriptor",
      `tenant=${"x".repeat(70)},plan=pro`,
      "--descriptor",
      "path=/api/a\\,b\\=c",
    ]);
    const pro = block(out, 1);
    expect(pro).toContain("\n  rule: shop.tenant.plan_pro (test/fixtures/explain/shop.yaml:6)\n");
    expect(pro).toContain("\n      key: sluice:{shop:tenant=acme|plan=pro}:fw1 (even windows; odd windows: sluice:{shop:tenant=acme|plan=pro}:fw1:1)\n");
    expect(pro).toContain("\n      key: sluice:{shop:tenant=acme|plan=pro}:tb\n");
    expect(pro).toContain("\n      key: sluice:{shop:tenant=acme|plan=pro}:q:2026-10 (the UTC month of 2026-10-31T23:59:30.000Z)");
    expect(block(out, 4)).toContain("key: sluice:{shop:path=/api/*}:fw1");
    expect(block(out, 6)).toContain("not checked: replaced by a limit of descriptor 7 (replaces name 'login_default')");
    expect(block(out, 9)).toContain("key: sluice:{shop:experiment=variant-b}:q:2026-10-31 ");
    expect(block(out, 10)).toMatch(/key: sluice:\{shop:tenant=#[A-Za-z0-9_-]{22}\|plan=pro\}:fw1/);
  });
});

describe("sluice explain on an approximate limit", () => {
  it("says how often it syncs", () => {
    const dir = ruleDir({
      "hot.yaml": [
        "domain: hot",
        "descriptors:",
        "  - key: ip",
        "    rate_limits:",
        "      - {unit: second, requests_per_unit: 1000, approximate: {}}",
        "      - {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 10, approximate: {sync_interval_ms: 250}}",
        "      - {unit: hour, requests_per_unit: 5000}",
        "",
      ].join("\n"),
    });
    const file = path.join(dir, "hot.yaml");
    const r = runCli(["explain", "--config", dir, "--domain", "hot", "--descriptor", "ip=10.0.0.1"]);
    expect([r.code, r.stderr]).toEqual([0, ""]);
    expect(r.stdout).toBe(
      [
        `domain hot: ${file} (failure_mode allow unless a descriptor says otherwise)`,
        "",
        "descriptor 1: ip=10.0.0.1",
        `  rule: hot.ip (${file}:3)`,
        "  matched:",
        `    ip=10.0.0.1  by key 'ip' (any value: each value counted apart) (${file}:3)`,
        "  limits:",
        `    rate_limits[0]: 1000 per second, fixed_window, approximate (leases of up to 100 ms), failure_mode allow (${file}:5)`,
        "      key: sluice:{hot:ip=10.0.0.1}:fw1 (even windows; odd windows: sluice:{hot:ip=10.0.0.1}:fw1:1)",
        `    rate_limits[1]: 60 per minute, token_bucket, burst 10, approximate (leases of up to 250 ms), failure_mode allow (${file}:6)`,
        "      key: sluice:{hot:ip=10.0.0.1}:tb",
        `    rate_limits[2]: 5000 per hour, fixed_window, failure_mode allow (${file}:7)`,
        "      key: sluice:{hot:ip=10.0.0.1}:fw3600 (even windows; odd windows: sluice:{hot:ip=10.0.0.1}:fw3600:1)",
        "",
      ].join("\n"),
    );
  });
});

describe("explain's input and errors", () => {
  it("parses k=v lists with backslash escapes", () => {
    expect(parseDescriptorArg("a=1,b=x=y")).toEqual([
      { key: "a", value: "1" },
      { key: "b", value: "x=y" },
    ]);
    expect(parseDescriptorArg("p=a\\,b,q=\\\\")).toEqual([
      { key: "p", value: "a,b" },
      { key: "q", value: "\\" },
    ]);
    expect(parseDescriptorArg("k\\=1=v,e=")).toEqual([
      { key: "k=1", value: "v" },
      { key: "e", value: "" },
    ]);
    expect(() => parseDescriptorArg("novalue")).toThrow(/has no '='/);
    expect(() => parseDescriptorArg("=v")).toThrow(/empty key/);
    expect(() => parseDescriptorArg("a=1,")).toThrow(/has no '='/);
    expect(() => parseDescriptorArg("a=1\\")).toThrow(/lone/);
  });

  it("exits 2 on usage errors and 1 when the rules fail to load", () => {
    const usage = (args: string[]) => runCli(["explain", ...args]);
    expect(usage(["--descriptor", "a=b"]).code).toBe(2);
    expect(usage(["--domain", "edge"]).code).toBe(2);
    expect(usage(["--domain", "edge", "--descriptor", "ab"]).stderr).toMatch(/--descriptor 'ab': descriptor entry 'ab' has no '='/);
    expect(usage(["--domain", "edge", "--descriptor", "a=b", "--at", "yesterday"]).code).toBe(2);
    expect(usage(["--domain", "edge", "--descriptor", "a=b", "--store", "x"]).code).toBe(2);
    expect(usage(["--domain", "edge", "--descriptor", "a=b", "extra"]).code).toBe(2);
    const bad = ruleDir({ "bad.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n" });
    const r = usage(["--config", bad, "--domain", "d", "--descriptor", "k=v"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/bad\.yaml:4: d\.k: invalid rate limit unit 'fortnight'/);
    expect(r.stdout).toBe("");
  });
});

describe("the explain example of docs/configuration.md", () => {
  it("is what sluice explain prints for that command today", () => {
    const page = fs.readFileSync(path.join(ROOT, "docs/configuration.md"), "utf8");
    const example = /```\n\$ sluice (explain [^\n]+)\n([\s\S]*?)```/.exec(page);
    expect(example).not.toBeNull();
    const args = example![1].split(" ");
    const r = runCli(args);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(example![2]);
  });
});
