// The per-request `limit` override: a fixed window on the descriptor's own entries, rules not consulted.
import { UNIT_SECONDS, type FailureMode, type Limit } from "../rules/model.js";
import { keysOnlyPath } from "./descriptor-path.js";
import { limitTag } from "./keys.js";
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
    burst: o.requestsPerUnit,
    algorithm: "fixed_window",
    keyTag: limitTag("fw", UNIT_SECONDS[o.unit]),
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
