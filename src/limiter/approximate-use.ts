// The limiter's side of approximate limits: their items are decided from this instance's leases
// (approximate/leases.ts) before the store is asked for the others; a request refused after all gives
// their units back to the leases, not to the store. A limit whose lease call failed answers by its
// failure policy, as an exact limit does. Without leases (a store that counts in this process) plan()
// sends them to the store: they are exact.
import type { LeaseRequest, Leases, LeaseTicket } from "../approximate/leases.js";
import type { Store } from "../store/store.js";
import type { Item, StoreCall } from "./limit-items.js";
import { byPolicy } from "./policy.js";

/** What deciding the approximate items left to undo when the request is refused: lease units, a fallback call. */
export interface ApproximateTicket {
  leases: LeaseTicket | undefined;
  policy: StoreCall | undefined;
}

/**
 * Decides the request's approximate items (plan() marks them only when there are leases); dryRun: the
 * request is refused already, nothing is taken. They go to the store instead when the key table is full.
 */
export async function decideApproximate(leases: Leases, items: Item[], dryRun: boolean, fallback: Store): Promise<ApproximateTicket> {
  const mine: Item[] = [];
  for (const it of items) if (it.via === "approximate") mine.push(it);
  const list: LeaseRequest[] = mine.map((it) => ({ check: it.check!, group: it.group, intervalMs: it.limit.approximate!.syncIntervalMs }));
  const decided = leases.decide(list, dryRun);
  if (!decided) {
    for (const it of mine) it.via = "store";
    return { leases: undefined, policy: undefined };
  }
  const { answers, ticket } = decided instanceof Promise ? await decided : decided;
  let failed: Item[] | undefined;
  for (let j = 0; j < mine.length; j++) {
    const a = answers[j];
    if (a) mine[j].result = a;
    else (failed ??= []).push(mine[j]);
  }
  const policy = failed ? await byPolicy(failed, dryRun, fallback) : undefined;
  return { leases: dryRun ? undefined : ticket, policy };
}

/** The request was refused: the approximate limits consume nothing (units back to the leases, the fallback refunded). */
export function giveBackApproximate(leases: Leases, t: ApproximateTicket | undefined): StoreCall | undefined {
  if (t?.leases) leases.giveBack(t.leases);
  return t?.policy;
}
