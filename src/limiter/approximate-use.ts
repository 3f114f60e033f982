// The limiter's side of approximate limits: their items are decided from the local view before the
// store is asked for the others (approximate/approximate-counters.ts), and given back when another
// limit refuses the request. Without a view (a store that counts in this process) they are exact.
import type { ApproximateCheck, ApproximateCounters } from "../approximate/approximate-counters.js";
import type { CheckResult } from "../store/store.js";
import type { Item } from "./item.js";

/** What decideApproximate counted, for a refund. */
export interface ApproximateTicket {
  list: ApproximateCheck[];
  results: CheckResult[];
}

/**
 * Decides the request's approximate items from the view (dryRun: count nothing); they go to the store
 * instead when there is no view or it has no room. Returns what was counted, if anything.
 */
export function decideApproximate(counters: ApproximateCounters | undefined, items: Item[], dryRun: boolean): ApproximateTicket | undefined {
  let mine: Item[] | undefined;
  for (const it of items) if (it.via === "approximate") (mine ??= []).push(it);
  if (!mine) return undefined;
  const list = counters ? mine.map((it) => ({ check: it.check!, group: it.group, syncIntervalMs: it.limit.approximate!.syncIntervalMs })) : undefined;
  const results = list && counters!.decide(list, dryRun);
  if (!results) {
    for (const it of mine) it.via = "store";
    return undefined;
  }
  for (let j = 0; j < mine.length; j++) mine[j].result = results[j];
  return dryRun ? undefined : { list: list!, results };
}
