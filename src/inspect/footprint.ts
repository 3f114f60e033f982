// What a rule set holds and about what it costs in memory once served (compact form of rules/flat.ts), for
// `sluice check`. The per-part figures were measured on Node 24 (docs/benchmarks.md, "Rules at scale"): about
// 470 bytes of heap per per-customer descriptor with one limit.
import type { RuleLevel, RuleSet } from "../rules/model.js";

/** Heap bytes of a node (with its source and its place in its level's map), and of a limit (with its list). */
const NODE_BYTES = 200;
const LIMIT_BYTES = 220;

interface Footprint {
  /** Descriptor nodes, with or without limits. */
  descriptors: number;
  limits: number;
  /** Estimated heap bytes of the compiled rules, strings included. */
  bytes: number;
}

export function footprint(rules: RuleSet): Footprint {
  const f: Footprint = { descriptors: 0, limits: 0, bytes: 0 };
  const walk = (level: RuleLevel) => {
    const visit = (n: { value: string; limits: { path: string }[]; children: RuleLevel }) => {
      f.descriptors++;
      f.bytes += NODE_BYTES + n.value.length;
      for (const l of n.limits) {
        f.limits++;
        f.bytes += LIMIT_BYTES + l.path.length;
      }
      walk(n.children);
    };
    for (const m of level.exact.values()) for (const n of m.values()) visit(n);
    for (const list of level.wildcards.values()) for (const n of list) visit(n);
    for (const n of level.keyOnly.values()) visit(n);
  };
  for (const d of rules.domains.values()) walk(d.root);
  return f;
}

/** "N descriptors (M limits), about X MiB in memory when served". */
export function footprintLine(f: Footprint): string {
  const mib = f.bytes / (1 << 20);
  const size = mib >= 10 ? mib.toFixed(0) : mib >= 0.1 ? mib.toFixed(1) : "0.1";
  return `${f.descriptors} descriptor${f.descriptors === 1 ? "" : "s"} (${f.limits} limit${f.limits === 1 ? "" : "s"}), about ${size} MiB in memory when served`;
}
