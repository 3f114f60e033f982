// YAML anchors and aliases in rule files, bounded as the reference's YAML reader (Go's yaml.v2) bounds them
// (issue 42): an anchor bomb is one error at once instead of an expansion of millions of nodes; an anchor holding
// an alias to itself is an error, not a stack overflow; ordinary aliases load as before. (Many errors, and the
// stack: test/integration/rule-errors.test.ts.)
import { describe, expect, it } from "vitest";
import { loadRuleFiles } from "../../src/rules/load.js";
import { matchLimit } from "../../src/rules/match.js";

const load = (text: string) => loadRuleFiles([{ name: "r.yaml", text }], { mergeDomains: false });

/** `levels` anchors, each a descriptor listing the one before `copies` times. */
function bomb(levels: number, copies: number): string {
  let text = "domain: bomb\ndescriptors:\n  - &d0 {key: a, rate_limit: {unit: second, requests_per_unit: 1}}\n";
  for (let i = 1; i <= levels; i++)
    text += `  - &d${i} {key: l${i}, descriptors: [${Array(copies)
      .fill(`*d${i - 1}`)
      .join(", ")}]}\n`;
  return text;
}

describe("aliases, as the reference bounds them", () => {
  it("an anchor bomb (a 500-byte file that expands to 111,111 descriptors) is one error, found at once", () => {
    const started = performance.now();
    const r = load(bomb(5, 10));
    expect(r.errors).toEqual([{ file: "r.yaml", line: 4, path: "", message: "error loading config file: yaml: document contains excessive aliasing" }]);
    // Ten levels would be 10^10 descriptors: refused as soon.
    expect(load(bomb(10, 10)).errors.map((e) => e.message)).toEqual(["error loading config file: yaml: document contains excessive aliasing"]);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it("an anchor that holds an alias to itself is an error naming it", () => {
    const r = load("domain: x\ndescriptors: &a\n  - key: k\n    descriptors: *a\n");
    expect(r.errors).toEqual([{ file: "r.yaml", line: 4, path: "", message: "error loading config file: yaml: anchor 'a' value contains itself" }]);
  });

  it("aliases in proportion load as before: one rate_limit shared by 2,000 descriptors, and a small expansion", () => {
    const lines = ["domain: shared", "descriptors:", "  - key: first", "    rate_limit: &rl {unit: minute, requests_per_unit: 7}"];
    for (let i = 0; i < 2000; i++) lines.push(`  - {key: k${i}, rate_limit: *rl}`);
    const r = load(`${lines.join("\n")}\n`);
    expect(r.errors).toEqual([]);
    const root = r.rules!.domains.get("shared")!.root;
    expect(matchLimit(root, [{ key: "k1999", value: "x" }])?.node.limits[0]).toMatchObject({ requestsPerUnit: 7, unit: "minute" });
    // Three levels of three copies of a valid descriptor: under yaml.v2's floor (1,000 decodes), expanded like any
    // YAML; each level's copies are duplicates of each other, as the reference says.
    const small = load(bomb(3, 3));
    expect(small.errors.length).toBe(2 + 3 * 2 + 9 * 2);
    expect(new Set(small.errors.map((e) => e.message.replace(/'.*'/, "'…'")))).toEqual(new Set(["duplicate descriptor composite key '…'"]));
  });
});
