// The per-request `limit` override: the default algorithm (a fixed window, as the reference) on the descriptor's own entries, rules not consulted.
import { algorithm, DEFAULT_ALGORITHM } from "../counters/registry.js";
import type { FailureMode, Limit } from "../rules/model.js";
import { keysOnlyPath } from "../core/descriptor-path.js";
import type { DescriptorRequest } from "./types.js";

export function overrideLimit(domain: string, d: DescriptorRequest, failureMode: FailureMode): Limit {
  const o = d.override!;
  return {
    // Keys only: the path names the limit in logs, and request values are never logged.
    path: keysOnlyPath(domain, d.entries),
    label: "override",
    source: { file: "(request override)", line: 0 },
    unit: o.unit,
    requestsPerUnit: o.requestsPerUnit,
    capacity: o.requestsPerUnit,
    // Counted as the reference counts it (a fixed window), whatever the rules use.
    algorithm: DEFAULT_ALGORITHM,
    keyTag: algorithm(DEFAULT_ALGORITHM).rule.keyTag({ unit: o.unit }, []),
    failureMode,
    unlimited: false,
    name: "",
    replaces: [],
    shadowMode: false,
    detailedMetric: false,
    valueToMetric: false,
    quotaMode: false,
  };
}
