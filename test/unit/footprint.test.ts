// `sluice check`'s count of descriptors and its memory estimate (src/inspect/footprint.ts).
import { describe, expect, it } from "vitest";
import { footprint, footprintLine } from "../../src/inspect/footprint.js";
import { loadRuleFiles } from "../../src/rules/load.js";

const perCustomer = (n: number) =>
  `domain: p\ndescriptors:\n${Array.from({ length: n }, (_, i) => `  - key: api_key\n    value: cust-${i}\n    rate_limit: {unit: minute, requests_per_unit: 10}\n`).join("")}`;

describe("footprint", () => {
  it("counts every descriptor node and limit; about 470 bytes a per-customer descriptor", () => {
    const rules = loadRuleFiles([{ name: "p.yaml", text: perCustomer(2) }], { mergeDomains: false }).rules!;
    // Each: node 200 + "cust-N" (6), limit 220 + "p.api_key_cust-N" (16).
    expect(footprint(rules)).toEqual({ descriptors: 2, limits: 2, bytes: 2 * (200 + 6 + 220 + 16) });
    const big = loadRuleFiles([{ name: "p.yaml", text: perCustomer(10_000) }], { mergeDomains: false }).rules!;
    expect(footprintLine(footprint(big))).toBe("10000 descriptors (10000 limits), about 4.3 MiB in memory when served");
  });

  it("nested descriptors count at every level", () => {
    const text = "domain: n\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: second, requests_per_unit: 1}\n";
    const rules = loadRuleFiles([{ name: "n.yaml", text }], { mergeDomains: false }).rules!;
    expect(footprint(rules)).toMatchObject({ descriptors: 2, limits: 1 });
    expect(footprintLine(footprint(rules))).toBe("2 descriptors (1 limit), about 0.1 MiB in memory when served");
  });
});
