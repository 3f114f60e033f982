// The limiter's working shapes: one limit of one descriptor through its evaluation, and what planning,
// the deny notes and the store calls hand each other.
import type { Limit } from "../rules/model.js";
import type { Check, CheckResult } from "../store/store.js";
import type { Probe } from "./deny-note.js";
import type { Decision, Via } from "./types.js";

export const UNLIMITED_REMAINING = 4294967295;

/** One limit of one descriptor of the request, through its evaluation. */
export interface Item {
  index: number;
  limit: Limit;
  hits: number;
  /** Absent for limits decided without the store (requests_per_unit 0). */
  check?: Check;
  group: number;
  result: CheckResult;
  via: Via;
}

/** A key of the request this request probes for: its note expired. */
export interface ProbeTicket {
  item: Item;
  probe: Probe;
}

/** What plan() found besides the items. */
export interface Plan {
  metadata: Decision["metadata"];
  /**
   * Quota-mode descriptors by index (1), when the request has any: the request is refused by them only
   * when every one of them has a limit that refused.
   */
  quota: Uint8Array | undefined;
  quotaCount: number;
  /** Items decided from the approximate view (none without a view: then they go to the store). */
  approximateCount: number;
}

/** Checks of one store group (or of the local fallback), decided in one atomic call. */
export interface StoreCall {
  items: Item[];
  /** The group number, or -1 for the local fallback. */
  group: number;
}
