// Store evaluation: the request's checks in one atomic call per store group, and the refund of calls
// that consumed for a request refused after all.
import type { Check, CheckResult, Store } from "../store/store.js";
import type { Item, StoreCall } from "./limit-items.js";
import { byPolicy, FALLBACK_GROUP } from "./policy.js";

/** One atomic call per store group, all groups at once; a failed group answers by its limits' policies. */
export async function evaluate(items: Item[], dryRun: boolean, store: Store, fallback: Store): Promise<StoreCall[]> {
  // Most requests touch one group (one Redis, one hash tag): no grouping map then.
  let group = -1;
  let single = true;
  for (const it of items) {
    if (it.via !== "store") continue;
    if (group === -1) group = it.group;
    else if (it.group !== group) single = false;
  }
  if (group === -1) return [];
  if (single) {
    const call = await applyGroup(group, items.filter(byStore), dryRun, store, fallback);
    return call ? [call] : [];
  }
  const byGroup = new Map<number, Item[]>();
  for (const it of items) {
    if (it.via !== "store") continue;
    const list = byGroup.get(it.group);
    if (list) list.push(it);
    else byGroup.set(it.group, [it]);
  }
  const pending: Promise<StoreCall | undefined>[] = [];
  for (const [g, list] of byGroup) pending.push(applyGroup(g, list, dryRun, store, fallback));
  const calls: StoreCall[] = [];
  for (const call of await Promise.all(pending)) if (call) calls.push(call);
  return calls;
}

/**
 * The group's checks in one store call; the call that consumed, or the local fallback's, or none.
 * dryRun: the request is refused already; the store only reports.
 */
async function applyGroup(group: number, list: Item[], dryRun: boolean, store: Store, fallback: Store): Promise<StoreCall | undefined> {
  const checks: Check[] = new Array(list.length);
  for (let j = 0; j < list.length; j++) checks[j] = list[j].check!;
  let results: CheckResult[];
  try {
    results = await store.apply(group, checks, dryRun);
  } catch (err) {
    return await byPolicy(list, dryRun, fallback, err);
  }
  for (let j = 0; j < list.length; j++) list[j].result = results[j];
  return { items: list, group };
}

/**
 * The request was refused: calls that committed (none of their own checks refused) give back what
 * they took, so a refused request consumes from none of its limits, on any node.
 */
export async function refundAll(calls: StoreCall[], store: Store, fallback: Store): Promise<void> {
  const refunds: Promise<void>[] = [];
  for (const u of calls) {
    if (u.items.some(blockedStore)) continue; // that call committed nothing
    const taken = u.items.filter((it) => it.hits > 0 && it.result.allowed);
    if (taken.length === 0) continue;
    const checks = taken.map((it) => it.check!);
    const results = taken.map((it) => it.result);
    if (u.group === -1) refunds.push(fallback.refund(FALLBACK_GROUP, checks, results));
    // Best effort: a node that fails now keeps the hits (never more than the limit let through).
    else refunds.push(store.refund(u.group, checks, results).catch(() => undefined));
    for (const it of taken) {
      it.result = { ...it.result, remaining: Math.min(it.result.remaining + it.hits, it.check!.capacity) };
    }
  }
  await Promise.all(refunds);
}

function byStore(it: Item): boolean {
  return it.via === "store";
}

/** A check whose refusal made the store consume nothing in its call (lua/apply.lua's rule). */
function blockedStore(it: Item): boolean {
  return !it.result.allowed && !it.check!.shadow;
}
