// One lease call for any store: the store's own (lua/lease.lua: give back, then take up to `want`, at
// least `need`, in one atomic call) or, for a store that counts in this process (memory), the same
// contract from apply and refund. RLQS assignments (src/rlqs/) take their units here, from the same
// counters exact and approximate limits use.
import type { Check, LeaseEntry, LeaseReply, Store } from "../store/store.js";

export function takeLeases(store: Store, group: number, entries: readonly LeaseEntry[]): Promise<LeaseReply> {
  if (store.lease) return store.lease(group, entries);
  return takeInProcess(store, group, entries);
}

/** apply/refund in one turn of the event loop per entry: an in-process store interleaves nothing meanwhile. */
async function takeInProcess(store: Store, group: number, entries: readonly LeaseEntry[]): Promise<LeaseReply> {
  const results: LeaseReply["results"] = [];
  for (const e of entries) {
    if (e.back > 0) {
      const back: Check = { ...e.check, hits: e.back };
      await store.refund(group, [back], [{ allowed: true, remaining: 0, resetSeconds: 0, retryAfterMs: -1, periodEndMs: e.backEndMs }]);
    }
    let taken = 0;
    if (e.want > 0) {
      const [r] = await store.apply(group, [{ ...e.check, hits: e.want, shadow: false }]);
      if (r.allowed) taken = e.want;
      else if (r.remaining >= e.need && r.remaining > 0) {
        const [s] = await store.apply(group, [{ ...e.check, hits: r.remaining, shadow: false }]);
        if (s.allowed) taken = r.remaining;
      }
    }
    const [probe] = await store.apply(group, [{ ...e.check, hits: Math.max(1, e.need), shadow: false }], true);
    results.push({ taken, probe: { ...probe, allowed: probe.remaining >= Math.max(1, e.need) } });
  }
  return { nowUs: Date.now() * 1000, results };
}
