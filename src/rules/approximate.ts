// A rate_limit's `approximate: {sync_interval_ms: N}` (sluice extension): decided from leases taken
// from the store's counter, each living at most N ms (src/approximate/leases.ts).
import { isMap } from "yaml";
import type { ApproximateMode } from "./model.js";
import { fail, fields, intInRange, lineOf, type Ctx, type Field } from "../core/yaml-fields.js";

const APPROXIMATE_KEYS = new Set(["sync_interval_ms"]);
const MIN_SYNC_INTERVAL_MS = 10;
const MAX_SYNC_INTERVAL_MS = 10_000;
const DEFAULT_SYNC_INTERVAL_MS = 100;

/** The mode of a present `approximate` key; undefined after an error. `{}` takes the default interval. */
export function parseApproximate(ctx: Ctx, f: NonNullable<Field>, path: string): ApproximateMode | undefined {
  const before = ctx.errors.length;
  const map = f.node;
  // `approximate:` left empty is refused rather than guessed: `{}` asks for the default.
  if (!isMap(map)) {
    fail(ctx, lineOf(ctx, map, f.line), path, "approximate must be a map with sync_interval_ms");
    return undefined;
  }
  const fl = fields(ctx, map, APPROXIMATE_KEYS, path);
  const interval = intInRange(ctx, fl.get("sync_interval_ms"), "sync_interval_ms", path, MIN_SYNC_INTERVAL_MS, MAX_SYNC_INTERVAL_MS);
  if (ctx.errors.length > before) return undefined;
  return { syncIntervalMs: interval ?? DEFAULT_SYNC_INTERVAL_MS };
}
