// The limiter's side of approximate limits: their items are decided from the local view before the
// store is asked for the others (approximate/approximate-counters.ts), and given back when another
// limit refuses the request. Without a view (a store that counts in this process) plan() sends them to
// the store: they are exact.
import type { ApproximateCheck, ApproximateCounters } from "../approximate/approximate-counters.js";
import type { CheckResult } from "../store/store.js";
import type { Item } from "./item.js";

/** What decideApproximate counted, for a refund. */
export interface ApproximateTicket {
  list: ApproximateCheck[];
  results: CheckResult[];
}

/**
 * Decides the request's approximate items (plan() marks them only when there is a view) from the view
 * (dryRun: count nothing); they go to the store instead when it has no room. Returns what was counted.
 */
export function decideApproximate(counters: ApproximateCounters, items: Item[], dryRun: boolean): ApproximateTicket | undefined {
  const mine: Item[] = [];
  for (const it of items) if (it.via === "approximate") mine.push(it);
  const list = mine.map((it) => ({ check: it.check!, group: it.group, syncIntervalMs: it.limit.approximate!.syncIntervalMs }));
  const results = counters.decide(list, dryRun);
  if (!results) {
    for (const it of mine) it.via = "store";
    return undefined;
  }
  for (let j = 0; j < mine.length; j++) mine[j].result = results[j];
  return dryRun ? undefined : { list, results };
}
