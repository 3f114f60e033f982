// The reference's dynamic_metadata (its RESPONSE_DYNAMIC_METADATA=true; src/service/ratelimit.go
// ratelimitToMetadata): the request echoed back, and the matched rules' `metadata` of the descriptors
// that passed, merged into one object: the reference's wire shapes (its field names, its unit enum names),
// so it lives with the transports. The limiter is handed this builder (LimiterOptions.referenceMetadata);
// wire-response.ts makes the object a Struct.
import type { Decision, DescriptorDecision, RateLimitRequest } from "../../limiter/types.js";

// envoy.type.v3.RateLimitUnit names, as Go's prototext prints a request's `limit` override.
const UNIT_NAMES: Record<string, string> = { second: "SECOND", minute: "MINUTE", hour: "HOUR", day: "DAY", month: "MONTH", year: "YEAR" };

/**
 * {domain, descriptors: [{entries: ["k=v", ...], limit?, hitsAddend?}], hitsAddend?, metadata?}:
 * `limit` is the override as Go prints it (`requests_per_unit:5 unit:HOUR`), a descriptor's hitsAddend
 * is there when the request set it (0 too), the request's when not 0. `metadata` merges, in request
 * order, the metadata of the rules of descriptors whose status is OK and that have a limit in force
 * (not unlimited, not replaced); the first value of a key wins, maps merge key by key.
 */
export function referenceMetadata(req: RateLimitRequest, statuses: readonly DescriptorDecision[], matched: Decision["metadata"]): Record<string, unknown> {
  const descriptors: Record<string, unknown>[] = new Array(req.descriptors.length);
  for (let i = 0; i < req.descriptors.length; i++) {
    const d = req.descriptors[i];
    const entries: string[] = new Array(d.entries.length);
    for (let j = 0; j < d.entries.length; j++) entries[j] = d.entries[j].key + "=" + d.entries[j].value;
    const out: Record<string, unknown> = { entries };
    if (d.override) {
      const rpu = d.override.requestsPerUnit;
      // proto3 text omits a zero field.
      out.limit = (rpu !== 0 ? `requests_per_unit:${rpu} ` : "") + `unit:${UNIT_NAMES[d.override.unit]}`;
    }
    if (d.hits !== undefined) out.hitsAddend = d.hits;
    descriptors[i] = out;
  }
  const res: Record<string, unknown> = { domain: req.domain, descriptors };
  if (req.hitsAddend !== 0) res.hitsAddend = req.hitsAddend;
  let merged: Record<string, unknown> | undefined;
  if (matched) {
    for (const m of matched) {
      const s = statuses[m.index];
      if (s.code !== "OK" || !s.limit || s.limit.unlimited) continue;
      merged = mergeInto(merged ?? {}, m.metadata);
    }
  }
  if (merged && Object.keys(merged).length > 0) res.metadata = merged;
  return res;
}

/** Adds src's keys that dest lacks; where both hold a map, merges them. Never changes src (rule data). */
function mergeInto(dest: Record<string, unknown>, src: Record<string, unknown>): Record<string, unknown> {
  for (const k of Object.keys(src)) {
    if (k === "__proto__") continue; // not a Struct field (toStruct drops it too)
    const v = src[k];
    if (!Object.hasOwn(dest, k)) {
      dest[k] = v;
    } else if (isMap(dest[k]) && isMap(v)) {
      // A copy: dest[k] may be another rule's own object.
      dest[k] = mergeInto({ ...(dest[k] as Record<string, unknown>) }, v as Record<string, unknown>);
    }
  }
  return dest;
}

function isMap(v: unknown): boolean {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}
