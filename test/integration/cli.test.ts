// The CLI contract: `sluice check`, usage errors, and `serve` refusing bad rules.
import { COMPAT_DIR } from "../helpers/compat.js";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, ruleDir, runCli, startSluice } from "../helpers/sluice.js";

const COMPAT = path.join(COMPAT_DIR, "config");

describe("sluice check", () => {
  it("prints ok and one summary line per domain for the shipped config", () => {
    const r = runCli(["check", "config"]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n")[0]).toBe("ok");
    expect(r.stdout).toMatch(/^domain edge: \d+ limits from edge\.yaml$/m);
  });

  it("checks ./config when no directory is given", () => {
    const r = runCli(["check"]);
    expect(r.code).toBe(0);
    expect(r.stdout.startsWith("ok\n")).toBe(true);
  });

  it("prints every error as FILE:LINE: path: message and exits 1", () => {
    const dir = ruleDir({
      "a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: foo\n      requests_per_unit: 1\n  - key: j\n    ratelimit: {}\n",
    });
    const r = runCli(["check", dir]);
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split("\n");
    expect(lines.length).toBe(2);
    expect(lines[0]).toMatch(/a\.yaml:5: d\.k: .*invalid rate limit unit 'foo'/);
    expect(lines[1]).toMatch(/a\.yaml:8: d\.j: .*unknown key 'ratelimit'/);
  });

  it("a missing directory is an error", () => {
    const r = runCli(["check", "/nonexistent/sluice-rules"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/nonexistent/);
  });

  it("usage errors exit 2", () => {
    expect(runCli(["frobnicate"]).code).toBe(2);
    expect(runCli(["serve", "--no-such-flag"]).code).toBe(2);
    expect(runCli(["serve", "--port", "seventy"]).code).toBe(2);
    expect(runCli([]).code).toBe(2);
  });
});

describe("sluice serve", () => {
  it("exits non-zero on a bad rule file, naming file and line", () => {
    const dir = ruleDir({ "bad.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n" });
    const r = runCli(["serve", "--config", dir, "--port", "0"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/bad\.yaml:5: /);
  });

  it("logs a JSON listening line with the port, after the rules are loaded", async () => {
    const s = await startSluice(["--config", path.join(ROOT, "config")]);
    const lines = s.logs.map((l) => JSON.parse(l));
    const loaded = lines.findIndex((l) => l.msg === "rules loaded");
    const listening = lines.findIndex((l) => l.msg === "listening");
    expect(loaded).toBeGreaterThanOrEqual(0);
    expect(listening).toBeGreaterThan(loaded);
    expect(lines[listening].port).toBe(s.port);
    expect(lines.some((l) => /single-instance/.test(l.msg))).toBe(true);
    expect(await s.stop()).toBe(0);
  });

  it("flags win over environment variables", async () => {
    const s = await startSluice(["--config", path.join(ROOT, "config")], { SLUICE_CONFIG: "/nonexistent" });
    expect(s.port).toBeGreaterThan(0);
    expect(await s.stop()).toBe(0);
  });

  it("loads the reference's duplicate-domain pair only with --merge-domains", () => {
    const dir = ruleDir({
      "one.yaml": "domain: test-domain\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
      "two.yaml": "domain: test-domain\ndescriptors:\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
    });
    const plain = runCli(["check", dir]);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/duplicate domain 'test-domain'/);
    expect(plain.stderr).toMatch(/one\.yaml/);
    const merged = runCli(["check", dir, "--merge-domains"]);
    expect(merged.code).toBe(0);
    expect(merged.stdout).toMatch(/domain test-domain: 2 limits/);
  });

  it("every reference fixture that the reference rejects, check rejects", () => {
    for (const f of ["bad_limit_unit", "bad_yaml", "empty_domain", "empty_key", "duplicate_key", "misspelled_key",
      "misspelled_key2", "non_map_list", "non_string_key", "replaces_empty", "replaces_self", "unlimited_with_unit"]) {
      const dir = ruleDir({ [`${f}.yaml`]: require_fixture(f) });
      const r = runCli(["check", dir]);
      expect(r.code, f).toBe(1);
      expect(r.stderr, f).toMatch(new RegExp(`${f}\\.yaml:\\d+: `));
    }
  });
});

import fs from "node:fs";
function require_fixture(name: string): string {
  return fs.readFileSync(path.join(COMPAT, `${name}.yaml`), "utf8");
}
