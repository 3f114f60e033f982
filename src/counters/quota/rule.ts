// The quota's rule spec: `quota: {period: day | month, limit: N, name}` on a descriptor, a calendar
// total in UTC next to its rate limits.
import { isMap } from "yaml";
import { fail, fields, int, lineOf, str, type Ctx, type Field } from "../../core/yaml-fields.js";
import type { BaseLimit, QuotaPeriod } from "../limit.js";

const QUOTA_KEYS = new Set(["period", "limit", "name"]);
const QUOTA_PERIODS = new Set<string>(["day", "month"]);

/** `quota: {period: day | month, limit: N}`: a calendar total in UTC, next to the rate limits. */
export function parseQuotaBlock(ctx: Ctx, f: NonNullable<Field>, path: string): BaseLimit<"quota"> | undefined {
  const before = ctx.errors.length;
  const map = f.node;
  if (!isMap(map)) {
    fail(ctx, lineOf(ctx, map, f.line), path, "quota must be a map with period and limit");
    return undefined;
  }
  const line = lineOf(ctx, map, f.line);
  const fl = fields(ctx, map, QUOTA_KEYS, path);
  const periodText = str(ctx, fl.get("period"), "period", path);
  const limit = int(ctx, fl.get("limit"), "limit", path, 0);
  const name = str(ctx, fl.get("name"), "name", path) ?? "";
  if (periodText === undefined) {
    if (!fl.has("period")) fail(ctx, f.line, path, "quota period must be set (day or month)");
  } else if (!QUOTA_PERIODS.has(periodText)) {
    fail(ctx, fl.get("period")!.line, path, `invalid quota period '${periodText}' (expected day or month)`);
  }
  if (!fl.has("limit")) fail(ctx, f.line, path, "quota limit must be set");
  if (ctx.errors.length > before) return undefined;
  const period = periodText as QuotaPeriod;
  return {
    path,
    label: "quota",
    source: { file: ctx.file, line },
    unit: period,
    requestsPerUnit: limit!,
    capacity: limit!,
    algorithm: "quota",
    period,
    unlimited: false,
    name,
    replaces: [],
  };
}
