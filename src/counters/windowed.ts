// The store side shared by algorithms that count in epoch-aligned windows of the limit's unit (fixed
// and sliding window): a check carries its window length, which is also its one wire parameter.
import { storeKey } from "../core/keys.js";
import { UNIT_SECONDS } from "./limit.js";
import { bindKey, type Algorithm } from "./algorithm.js";
import type { CheckBase } from "./check.js";

export interface WindowedCheck<Name extends string> extends CheckBase {
  algorithm: Name;
  /** Window length in seconds (epoch-aligned). */
  windowSeconds: number;
}

type WindowedParts = "check" | "params" | "keys" | "limitParam" | "bind";

export function windowedCheck<Name extends string, Level>(name: Name): Pick<Algorithm<WindowedCheck<Name>, Level>, WindowedParts> {
  return {
    check: (l, ctx) => ({
      key: storeKey(ctx.hashTag, l.keyTag, ctx.keyPrefix),
      algorithm: name,
      capacity: l.capacity,
      windowSeconds: UNIT_SECONDS[l.unit],
      hits: ctx.hits,
      shadow: ctx.shadow,
    }),
    params: (c) => [c.windowSeconds],
    keys: (c) => [c.key],
    limitParam: (c) => c.windowSeconds,
    bind: bindKey,
  };
}
