// An RLQS bucket's assignments, from its state (bucket-state.ts) and the rule's lease maths (lease-math.ts): what
// to ask the store for now (a fresh lease, an extension of the current one, or only units to give back), and
// what to send Envoy once the store answered (a rate lease, a burst lease near the limit, DENY_ALL at it).
// stream.ts makes the store calls and sends.
import { UNIT_SECONDS } from "../counters/limit.js";
import type { LeaseEntry, LeaseReply } from "../store/store.js";
import { type BucketState, SETTLE_MS } from "./bucket-state.js";
import { DEFAULT_TTL_SECONDS, type RlqsCounters } from "./context.js";
import { freshWant, isBurst, rateBudget, rateChanged, rateFor, spareUnits, targetRate, ttlSeconds } from "./lease-math.js";
import type { BucketAction } from "./wire.js";

/** An extension is sent only while the current assignment surely still runs in Envoy when it arrives. */
const EXTEND_SAFETY_MS = 300;
/**
 * An assignment is renewed (by sluice's own timer: Envoy 1.40 reports every 5 s whatever its reporting_interval
 * says) this long before it ends, so the renewal arrives while it still runs.
 */
export const RENEW_LEAD_MS = 1200;
/** A burst lease is replaced only this close to its end: a new bucket in Envoy, which keeps only the share of tokens the old one had left. */
export const BURST_LEAD_MS = 150;
/** A bucket denied at the limit asks again this often: units other Envoys did not use come back meanwhile. */
const AT_LIMIT_RETRY_MS = 1000;

export interface Planned {
  b: BucketState;
  kind: "fresh" | "extend";
  rate: number;
  ttl: number;
  entries: LeaseEntry[];
  backs: number[];
}

/** An assignment's longest life in whole seconds: the rule's sync_interval_ms rounded up, else the default. */
export function ttlCap(b: BucketState): number {
  const rule = b.rule.kind === "leases" ? b.rule.limits[0] : undefined;
  const sync = rule?.approximate ? Math.ceil(rule.approximate.syncIntervalMs / 1000) : DEFAULT_TTL_SECONDS;
  // Whole seconds: Envoy reads only the seconds (0 would expire at once).
  return Math.max(1, sync);
}

/** ALLOW_ALL or DENY_ALL for the bucket, unless the same one still runs long enough. */
export function blanket(b: BucketState, kind: "allow" | "deny", now: number, actions: BucketAction[]): void {
  const ttl = ttlCap(b);
  if (b.blanket === kind && b.blanketEndMs - now > RENEW_LEAD_MS) return;
  b.retire(now);
  b.blanket = kind;
  b.blanketEndMs = now + ttl * 1000;
  b.ttlSent = ttl;
  actions.push({ entries: b.entries, kind: "blanket", deny: kind === "deny", ttlSeconds: ttl });
}

/** What the bucket needs from the store now, if anything: a fresh lease, or more life for the current one. */
export function plan(b: BucketState, now: number): Planned | undefined {
  if (b.rule.kind !== "leases") return undefined;
  const cap = ttlCap(b);
  const limit = b.rule.limits[0];
  const initial = Math.max(1, Math.floor((limit.requestsPerUnit / UNIT_SECONDS[limit.unit]) * 0.25));
  const rate = b.demand < 0 ? initial : targetRate(b.demand);
  const cur = b.lease;
  const renewBefore = RENEW_LEAD_MS;
  let kind: "fresh" | "extend" = "fresh";
  let want: number;
  let ttl = ttlSeconds(now, cap, b.windowEndMs);
  // The store had nothing left at the last try: units come back only as other leases settle.
  if (now < b.retryAtMs) return giveBackOnly(b, now);
  if (cur && cur.rate > 0 && now < cur.endMs - EXTEND_SAFETY_MS && !rateChanged(cur.asked, rate)) {
    if (cur.endMs - now > renewBefore) return giveBackOnly(b, now);
    const newEnd = now + ttl * 1000;
    if (newEnd <= cur.endMs) return giveBackOnly(b, now);
    kind = "extend";
    want = rateBudget(cur.rate, newEnd - cur.startMs) - cur.live.budget;
  } else {
    if (cur && cur.rate === 0 && now < cur.endMs - BURST_LEAD_MS) return giveBackOnly(b, now);
    if (b.demand === 0 && cur === undefined && b.blanket === "deny") return undefined;
    if (b.windowEndMs > 0 && ttl < 1) return undefined; // the window's end is too near: the next window's lease follows
    if (b.windowEndMs === 0) ttl = cap;
    // Units this call gives back count as left: they go back before the take (lua/lease.lua).
    want = freshWant(rate, b.demand, ttl, b.storeRemaining + spare(b, now));
  }
  return plannedEntries(b, kind, rate, ttl, want, now);
}

/** No take due; units that can go back wait for the next call, unless they are a good part of the limit. */
function giveBackOnly(b: BucketState, now: number): Planned | undefined {
  if (b.rule.kind !== "leases") return undefined;
  const units = spare(b, now);
  // Near the limit every unit counts: other Envoys may be denied for want of it.
  const capacity = b.rule.checks[0].capacity;
  if (units < 1 || (units < capacity * 0.05 && b.storeRemaining >= capacity * 0.1)) return undefined;
  return plannedEntries(b, "extend", b.lease?.rate ?? 0, 0, 0, now);
}

/** Units of the bucket's window that can go back to the store now. */
function spare(b: BucketState, now: number): number {
  if (b.charged.length === 0 || (b.windowEndMs > 0 && now >= b.windowEndMs)) return 0;
  return spareUnits(Math.min(...b.charged), b.allowed, b.liveBudgets());
}

function plannedEntries(b: BucketState, kind: "fresh" | "extend", rate: number, ttl: number, want: number, now: number): Planned {
  const rule = b.rule as Extract<typeof b.rule, { kind: "leases" }>;
  const windowOpen = b.windowEndMs === 0 || now < b.windowEndMs;
  const live = b.liveBudgets();
  const backs = rule.checks.map((_, i) => (windowOpen ? spareUnits(b.charged[i], b.allowed, live) : 0));
  const entries = rule.checks.map((check, i) => ({ check, want: Math.max(0, want), need: 1, back: backs[i], backEndMs: b.periodEndMs }));
  return { b, kind, rate, ttl, entries, backs };
}

/** `local`: the units came from the local fallback, not the store: the store's ledger is not touched. */
export function install(
  p: Planned,
  results: LeaseReply["results"],
  storeNowUs: number,
  sentMs: number,
  actions: BucketAction[],
  c: RlqsCounters,
  now: number,
  local = false,
): void {
  const { b } = p;
  let granted = Infinity;
  let periodEndMs = 0;
  for (let i = 0; i < results.length; i++) {
    const r = results[i];
    c.unitsLeased += r.taken;
    if (!local) {
      b.charged[i] = (b.charged[i] ?? 0) + r.taken - p.backs[i];
      c.unitsReturned += p.backs[i];
    }
    granted = Math.min(granted, r.taken);
    if (i === 0 || r.probe.remaining < b.storeRemaining) b.tightest = i;
    b.storeRemaining = i === 0 ? r.probe.remaining : Math.min(b.storeRemaining, r.probe.remaining);
    if (r.probe.periodEndMs > 0) periodEndMs = periodEndMs === 0 ? r.probe.periodEndMs : Math.min(periodEndMs, r.probe.periodEndMs);
  }
  if (periodEndMs > 0) {
    b.periodEndMs = periodEndMs;
    b.windowEndMs = sentMs + (periodEndMs - Math.floor(storeNowUs / 1000));
  }
  if (p.entries[0].want === 0) return; // a give-back only
  const cur = b.lease;
  if (p.kind === "extend" && cur) {
    // Too late to extend (the store call was slow): Envoy may have dropped the bucket, and an extension
    // arriving then starts a new, full one. The units taken stay charged and go back once spare.
    if (now >= cur.endMs - EXTEND_SAFETY_MS / 2) return;
    // As much more life as the units taken pay for, never past the window.
    let ttl = ttlSeconds(now, p.ttl, b.windowEndMs);
    while (ttl > 0 && rateBudget(cur.rate, now + ttl * 1000 - cur.startMs) - cur.live.budget > granted) ttl--;
    const end = now + ttl * 1000;
    if (end <= cur.endMs) {
      b.retryAtMs = now + AT_LIMIT_RETRY_MS;
      return;
    }
    cur.endMs = end;
    cur.live.budget = rateBudget(cur.rate, end - cur.startMs);
    cur.live.settleAfterMs = end + SETTLE_MS;
    b.ttlSent = ttl;
    actions.push({ entries: b.entries, kind: "token_bucket", bucket: cur.spec, ttlSeconds: ttl });
    return;
  }
  const ttl = ttlSeconds(now, p.ttl, b.windowEndMs);
  // Less than a rate lease of the rate asked (near the limit): a burst lease of exactly the units granted,
  // which Envoy spends as fast as its requests come, so none wait unspent in a refill schedule.
  const rate = ttl >= 1 && !isBurst(granted, p.rate, ttl) ? rateFor(granted, ttl) : 0;
  b.retire(now);
  if (ttl < 1 || granted < 1) {
    // At the limit: deny until the window resets (a later report retries when units come back).
    const until = b.windowEndMs > now ? Math.max(1, Math.ceil((b.windowEndMs - now) / 1000)) : ttlCap(b);
    b.blanket = "deny";
    b.blanketEndMs = now + until * 1000;
    b.retryAtMs = now + AT_LIMIT_RETRY_MS;
    b.ttlSent = until;
    actions.push({ entries: b.entries, kind: "blanket", deny: true, ttlSeconds: until });
    return;
  }
  b.epoch++;
  // A rate lease: a bucket of one second's tokens refilling `rate` a second. Too few units for a rate of 1:
  // a burst lease whose refill over its life stays under one token.
  const spec =
    rate >= 1
      ? { maxTokens: rate, tokensPerFill: rate, fillSeconds: 1, fillNanos: b.epoch % 1_000_000 }
      : { maxTokens: granted, tokensPerFill: 1, fillSeconds: ttl + 1, fillNanos: b.epoch % 1_000_000 };
  const budget = rate >= 1 ? rateBudget(rate, ttl * 1000) : granted;
  const endMs = now + ttl * 1000;
  b.lease = { spec, rate, asked: p.rate, startMs: now, endMs, live: { budget, settleAfterMs: endMs + SETTLE_MS } };
  b.live.push(b.lease.live);
  b.blanket = undefined;
  b.ttlSent = ttl;
  actions.push({ entries: b.entries, kind: "token_bucket", bucket: spec, ttlSeconds: ttl });
}
