// The failure policy: what a limit answers when its store node fails (failure_mode allow, deny or
// local, the last counted by the fallback store in this process; error fails the call, as the reference does).
import { StoreUnavailableError, type Store } from "../store/store.js";
import type { Item, StoreCall } from "./limit-items.js";

/** The local fallback counts in this process: all its keys are in one group. */
export const FALLBACK_GROUP = 0;

/** How long a client refused by the `deny` policy is told to wait: about when the breaker probes again. */
const POLICY_DENY_RETRY_MS = 1000;

/** The store failed for these items: each limit's failure_mode answers; `local` ones count in memory. */
export async function byPolicy(list: Item[], dryRun: boolean, fallback: Store, cause?: unknown): Promise<StoreCall | undefined> {
  // `error` (a shadow limit never refuses, so it allows instead): the whole call fails with UNAVAILABLE
  // and Envoy's failure_mode_deny decides.
  for (const it of list) {
    if (it.limit.failureMode === "error" && !it.limit.shadowMode) {
      if (cause instanceof StoreUnavailableError) throw cause;
      throw new StoreUnavailableError(cause instanceof Error ? cause.message : String(cause), cause);
    }
  }
  const local: Item[] = [];
  for (const it of list) {
    const c = it.check!;
    if (it.limit.failureMode === "local") {
      local.push(it);
    } else if (it.limit.failureMode === "deny" && !it.limit.shadowMode) {
      it.via = "policy_deny";
      it.result = { allowed: false, remaining: 0, resetSeconds: 1, retryAfterMs: POLICY_DENY_RETRY_MS, periodEndMs: 0 };
    } else {
      it.via = it.limit.failureMode === "deny" ? "policy_deny" : "policy_allow";
      it.result = { allowed: true, remaining: c.capacity, resetSeconds: 0, retryAfterMs: -1, periodEndMs: 0 };
    }
  }
  if (local.length === 0) return undefined;
  const results = await fallback.apply(
    FALLBACK_GROUP,
    local.map((it) => it.check!),
    dryRun,
  );
  for (let j = 0; j < local.length; j++) {
    local[j].via = "policy_local";
    local[j].result = results[j];
  }
  return { items: local, group: -1 };
}
