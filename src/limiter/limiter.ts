// The decision: rules -> limits -> one atomic store call per store group -> per-descriptor statuses.
// Knows nothing of gRPC or of Redis commands.
import { UNIT_SECONDS, type Limit, type QuotaPeriod, type RuleNode, type RuleSet } from "../rules/model.js";
import { matchLimit } from "../rules/match.js";
import { systemClock, type Clock } from "../store/clock.js";
import { MemoryStore } from "../store/memory.js";
import { checkParam, type Check, type CheckResult, type Store } from "../store/store.js";
import { PeriodCache } from "./calendar.js";
import { DEFAULT_DENY_NOTE_MAX_ENTRIES, DEFAULT_DENY_NOTE_MAX_MS, DenyNotes, type Probe } from "./deny-note.js";
import { descriptorTag, quotaKeyTag, storeKey } from "./keys.js";
import { overrideLimit } from "./override.js";
import { rateLimitHeaders, type RateLimitHeaderNames } from "./rate-limit-headers.js";
import { referenceMetadata } from "./ref-metadata.js";
import type { Decision, DescriptorDecision, DescriptorRequest, LimitOutcome, RateLimitRequest, Via } from "./types.js";

export const UNLIMITED_REMAINING = 4294967295;

/** Keys the local fallback (limits with failure_policy local) holds, unless configured (SLUICE_LOCAL_MAX_KEYS). */
export const DEFAULT_LOCAL_MAX_KEYS = 100_000;

/** How long a client refused by the `deny` policy is told to wait: about when the breaker probes again. */
const POLICY_DENY_RETRY_MS = 1000;

export interface LimiterOptions {
  /** Local clock: quota periods sent to the store, deny note expiry. */
  clock?: Clock;
  /** Where `failure_mode: local` limits are counted while their store node fails. */
  fallback?: MemoryStore;
  /** Maximum deny notes kept (least recently used dropped); 0 disables the note. */
  denyNoteMaxEntries?: number;
  /** Longest a deny note refuses before the store is asked again (default 60 s). */
  denyNoteMaxMs?: number;
  /**
   * The reference's global shadow mode (its SHADOW_MODE): a request the limits refuse is answered OK,
   * statuses unchanged. Everything else runs as when refusing (nothing consumed, notes, counters), so
   * the counts preview enforcement; Decision.shadowed marks the answers it turned.
   */
  globalShadowMode?: boolean;
  /** The reference's global quota mode (its QUOTA_MODE): every descriptor is in quota mode (see decide). */
  globalQuotaMode?: boolean;
  /** Starts every store key (--key-prefix; keys.ts), so deployments can share one Redis. */
  keyPrefix?: string;
  /** Add the reference's RateLimit-* headers to every answer with a limit (SLUICE_RESPONSE_HEADERS); off when absent. */
  responseHeaders?: RateLimitHeaderNames;
  /**
   * dynamic_metadata: `rules` (default) the matched rules' metadata by descriptor index; `reference`
   * the reference's (RESPONSE_DYNAMIC_METADATA: ref-metadata.ts); `off` none.
   */
  responseMetadata?: ResponseMetadataMode;
}

export type ResponseMetadataMode = "rules" | "reference" | "off";
export const DEFAULT_RESPONSE_METADATA: ResponseMetadataMode = "rules";

/** One limit of one descriptor of the request, through its evaluation. */
interface Item {
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
interface ProbeTicket {
  item: Item;
  probe: Probe;
}

/** What plan() found besides the items. */
interface Plan {
  metadata: Decision["metadata"];
  /**
   * Quota-mode descriptors by index (1), when the request has any: the request is refused by them only
   * when every one of them has a limit that refused.
   */
  quota: Uint8Array | undefined;
  quotaCount: number;
}

/** Checks of one store group (or of the local fallback), decided in one atomic call. */
interface Unit {
  items: Item[];
  /** The group number, or -1 for the local fallback. */
  group: number;
}

export class Limiter {
  private rules: RuleSet;
  /** Bumped by setRules: a deny note learnt under older rules is not used. */
  private generation = 0;
  private readonly clock: Clock;
  private readonly fallback: MemoryStore;
  private readonly notes: DenyNotes | undefined;
  private readonly periods: Record<QuotaPeriod, PeriodCache> = { day: new PeriodCache("day"), month: new PeriodCache("month") };
  private readonly globalShadowMode: boolean;
  private readonly globalQuotaMode: boolean;
  private readonly keyPrefix: string;
  private readonly responseHeaders: RateLimitHeaderNames | undefined;
  private readonly responseMetadata: ResponseMetadataMode;

  constructor(rules: RuleSet, private readonly store: Store, opts: LimiterOptions = {}) {
    this.rules = rules;
    this.clock = opts.clock ?? systemClock;
    this.fallback = opts.fallback ?? new MemoryStore({ clock: this.clock, maxKeys: DEFAULT_LOCAL_MAX_KEYS });
    const maxNotes = opts.denyNoteMaxEntries ?? DEFAULT_DENY_NOTE_MAX_ENTRIES;
    if (maxNotes > 0) this.notes = new DenyNotes(maxNotes, opts.denyNoteMaxMs ?? DEFAULT_DENY_NOTE_MAX_MS);
    this.globalShadowMode = opts.globalShadowMode ?? false;
    this.globalQuotaMode = opts.globalQuotaMode ?? false;
    this.keyPrefix = opts.keyPrefix ?? "";
    this.responseHeaders = opts.responseHeaders;
    this.responseMetadata = opts.responseMetadata ?? DEFAULT_RESPONSE_METADATA;
  }

  /** Swap in a new rule set atomically; counters live in the store, so unchanged rules keep theirs. */
  setRules(rules: RuleSet): void {
    this.rules = rules;
    this.generation++; // calls in flight may still learn notes: under the old generation, unused
    this.notes?.clear();
  }

  getRules(): RuleSet {
    return this.rules;
  }

  get denyNoteCount(): number {
    return this.notes?.size ?? 0;
  }

  async shouldRateLimit(req: RateLimitRequest): Promise<Decision> {
    let nowMs = Math.floor(this.clock.nowMicros() / 1000);
    const generation = this.generation;
    const items: Item[] = [];
    const plan = this.plan(req, nowMs, items);

    // A limit that blocks everything (requests_per_unit: 0) refuses the request already: the store is
    // asked only for the other limits' figures (a dry run, nothing consumed). Live deny notes for every
    // store limit of the request refuse it without a store call; a request with any other store limit
    // goes to the store, which also keeps its figures true. While another request probes a key whose
    // note expired, its answer decides for this one too (waited for at most twice, so a key that keeps
    // being emptied by its probes costs waiters two round trips at most).
    const blocked = requestRefused(items, plan); // store items are not evaluated yet: they count as allowed
    let probes: ProbeTicket[] | undefined;
    for (let waits = 0; !blocked && this.notes; waits++) {
      const probe = this.consultNotes(items, generation, nowMs);
      if (probe === true) return this.answer(req, decide(req.descriptors.length, items, plan, this.globalShadowMode), plan);
      if (probe && waits < 2) {
        await probe.done;
        nowMs = Math.floor(this.clock.nowMicros() / 1000);
      } else {
        probes = this.startProbes(items, generation, nowMs);
        break;
      }
    }
    try {
      const units = await this.evaluate(items, blocked);
      if (!blocked && requestRefused(items, plan)) await this.refundAll(units);
      this.takeNotes(items, generation, nowMs);
    } finally {
      if (probes) this.endProbes(probes);
    }
    return this.answer(req, decide(req.descriptors.length, items, plan, this.globalShadowMode), plan);
  }

  /** What the settings add to a decision: the rate-limit headers, and which dynamic_metadata. */
  private answer(req: RateLimitRequest, d: Decision, plan: Plan): Decision {
    if (this.responseHeaders) {
      const headers = rateLimitHeaders(this.responseHeaders, d.statuses, plan.quota);
      if (headers) d.headers = headers;
    }
    if (this.responseMetadata !== "rules") {
      if (this.responseMetadata === "reference") d.dynamicMetadata = referenceMetadata(req, d.statuses, plan.metadata);
      d.metadata = undefined;
    }
    return d;
  }

  /** Matches each descriptor and turns its limits into items with store checks. */
  private plan(req: RateLimitRequest, nowMs: number, items: Item[]): Plan {
    const domain = this.rules.domains.get(req.domain);
    if (!domain) return NO_PLAN;
    const n = req.descriptors.length;
    const requestHits = req.hitsAddend === 0 ? 1 : req.hitsAddend;
    const limits: (readonly Limit[] | undefined)[] = new Array(n);
    const nodes: (RuleNode[] | undefined)[] = new Array(n);
    let replaced: Set<string> | undefined;
    let metadata: Decision["metadata"];

    for (let i = 0; i < n; i++) {
      const d = req.descriptors[i];
      if (d.override) {
        limits[i] = [overrideLimit(req.domain, d, domain.failureMode)];
        continue;
      }
      const m = matchLimit(domain.root, d.entries);
      if (!m) continue;
      limits[i] = m.node.limits;
      nodes[i] = m.nodes;
      if (m.node.metadata) (metadata ??= []).push({ index: i, metadata: m.node.metadata });
      for (const l of m.node.limits) {
        if (l.replaces.length === 0) continue;
        replaced ??= new Set();
        for (const name of l.replaces) replaced.add(name);
      }
    }

    let quota: Uint8Array | undefined;
    let quotaCount = 0;
    for (let i = 0; i < n; i++) {
      if (!this.inQuotaMode(limits[i], replaced)) continue;
      (quota ??= new Uint8Array(n))[i] = 1;
      quotaCount++;
    }

    for (let i = 0; i < n; i++) {
      const list = limits[i];
      if (!list) continue;
      // A refusal of a limit of one of several quota-mode descriptors must not stop the store from
      // consuming the others (the store counts it as shadow: it consumes nothing itself); the limiter
      // decides and refunds when they all refused. The only quota-mode descriptor refuses as any other.
      const nonBlocking = quotaCount > 1 && quota![i] === 1;
      const d = req.descriptors[i];
      const hits = d.hits ?? requestHits;
      let tag: string | undefined;
      let group = 0;
      let groupUnit = 0; // the unit (seconds) `group` was asked for; 0 = not asked yet
      for (const limit of list) {
        if (replaced && limit.name !== "" && replaced.has(limit.name)) continue;
        if (limit.unlimited) {
          items.push({ index: i, limit, hits, group: 0, result: UNLIMITED_RESULT, via: "static" });
          continue;
        }
        if (limit.requestsPerUnit === 0) {
          // Blocks everything; no counter to keep.
          items.push({ index: i, limit, hits, group: 0, result: blockedResult(limit), via: "static" });
          continue;
        }
        tag ??= descriptorTag(req.domain, d, nodes[i]);
        // The store may keep per-second limits apart (split-by-unit.ts): it is asked again when the unit changes.
        const unitSeconds = UNIT_SECONDS[limit.unit];
        if (unitSeconds !== groupUnit) {
          group = this.store.groupOf(tag, unitSeconds);
          groupUnit = unitSeconds;
        }
        const check = this.toCheck(tag, limit, hits, nowMs, nonBlocking);
        items.push({ index: i, limit, hits, check, group, result: NOT_EVALUATED, via: "store" });
      }
    }
    return metadata || quota ? { metadata, quota, quotaCount } : NO_PLAN;
  }

  /**
   * A descriptor in quota mode, as the reference decides it: not an unlimited one (replaced or not);
   * under global quota mode every other one, even one no rule matched (it never refuses, so such a
   * request is never refused by its quota-mode descriptors); else one with a quota_mode limit in force.
   */
  private inQuotaMode(list: readonly Limit[] | undefined, replaced: Set<string> | undefined): boolean {
    if (list) for (const l of list) if (l.unlimited) return false;
    if (this.globalQuotaMode) return true;
    if (!list) return false;
    for (const l of list) if (l.quotaMode && !(replaced && l.name !== "" && replaced.has(l.name))) return true;
    return false;
  }

  private toCheck(tag: string, limit: Limit, hits: number, nowMs: number, nonBlocking: boolean): Check {
    const windowSeconds = UNIT_SECONDS[limit.unit];
    const check: Check = {
      key: "",
      algorithm: limit.algorithm,
      capacity: limit.algorithm === "token_bucket" ? limit.burst : limit.requestsPerUnit,
      windowSeconds,
      refillPerSecond: limit.requestsPerUnit / windowSeconds,
      hits,
      shadow: limit.shadowMode || nonBlocking,
    };
    if (limit.period) {
      const { first, second } = this.periods[limit.period].pairAt(nowMs);
      check.key = storeKey(tag, quotaKeyTag(first.label), this.keyPrefix);
      check.periods = { nextKey: storeKey(tag, quotaKeyTag(second.label), this.keyPrefix), startMs: first.startMs, boundaryMs: first.endMs, endMs: second.endMs };
    } else {
      check.key = storeKey(tag, limit.keyTag, this.keyPrefix);
    }
    return check;
  }

  /**
   * true when a live note speaks for every store limit of the request: the items are answered from
   * them (refused, nothing left). Else the probe in flight to wait for, when the only limits without a
   * live note are ones whose expired note another request is probing; else undefined (ask the store).
   */
  private consultNotes(items: Item[], generation: number, nowMs: number): true | Probe | undefined {
    let probe: Probe | undefined;
    let noted = 0;
    for (const it of items) {
      if (it.via !== "store") continue;
      const c = it.check!;
      if (it.limit.shadowMode) return undefined; // its own verdict and figures come from the store only
      // A note is about one hit: a token bucket's Retry-After for more, or a cost over the limit, differ.
      if (it.hits > 1 && (c.algorithm === "token_bucket" || it.hits > c.capacity)) return undefined;
      const note = this.notes!.get(c.key, c.algorithm, c.capacity, checkParam(c), generation, nowMs);
      if (!note) return undefined;
      if (note.untilMs <= nowMs) {
        if (!note.probe) return undefined;
        probe ??= note.probe;
        continue;
      }
      noted++;
    }
    if (probe || noted === 0) return probe;
    for (const it of items) {
      if (it.via !== "store") continue;
      const note = this.notes!.peek(it.check!.key)!; // matched and touched above
      it.via = "deny_note";
      it.result = {
        allowed: false,
        remaining: 0,
        resetSeconds: Math.max(Math.ceil((note.resetAtMs - nowMs) / 1000), 1),
        retryAfterMs: note.retryAtMs - nowMs,
        periodEndMs: note.periodEndMs,
      };
    }
    return true;
  }

  /** Keys of this request whose notes expired and nobody probes: this request asks the store for them. */
  private startProbes(items: Item[], generation: number, nowMs: number): ProbeTicket[] | undefined {
    let probes: ProbeTicket[] | undefined;
    for (const it of items) {
      if (it.via !== "store" || it.limit.shadowMode) continue;
      const c = it.check!;
      const probe = this.notes!.startProbe(c.key, c.algorithm, c.capacity, checkParam(c), generation, nowMs);
      if (probe) (probes ??= []).push({ item: it, probe });
    }
    return probes;
  }

  private endProbes(probes: ProbeTicket[]): void {
    for (const { item, probe } of probes) {
      const r = item.result;
      this.notes!.endProbe(item.check!.key, probe, item.via === "store" && r.allowed && item.hits > 0 && r.remaining === 0);
    }
  }

  /** One atomic call per store group, all groups at once; a failed group answers by its limits' policies. */
  private async evaluate(items: Item[], dryRun: boolean): Promise<Unit[]> {
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
      const unit = await this.applyGroup(group, items.filter(byStore), dryRun);
      return unit ? [unit] : [];
    }
    const byGroup = new Map<number, Item[]>();
    for (const it of items) {
      if (it.via !== "store") continue;
      const list = byGroup.get(it.group);
      if (list) list.push(it);
      else byGroup.set(it.group, [it]);
    }
    const calls: Promise<Unit | undefined>[] = [];
    for (const [g, list] of byGroup) calls.push(this.applyGroup(g, list, dryRun));
    const units: Unit[] = [];
    for (const unit of await Promise.all(calls)) if (unit) units.push(unit);
    return units;
  }

  /**
   * The group's checks in one store call; the unit that consumed, or the local fallback's, or none.
   * dryRun: the request is refused already; the store only reports.
   */
  private async applyGroup(group: number, list: Item[], dryRun: boolean): Promise<Unit | undefined> {
    const checks: Check[] = new Array(list.length);
    for (let j = 0; j < list.length; j++) checks[j] = list[j].check!;
    let results: CheckResult[];
    try {
      results = await this.store.apply(group, checks, dryRun);
    } catch {
      return this.byPolicy(list, dryRun);
    }
    for (let j = 0; j < list.length; j++) list[j].result = results[j];
    return { items: list, group };
  }

  /** The store failed for these items: each limit's failure_mode answers; `local` ones count in memory. */
  private byPolicy(list: Item[], dryRun: boolean): Unit | undefined {
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
    const results = this.fallback.applyNow(local.map((it) => it.check!), dryRun);
    for (let j = 0; j < local.length; j++) {
      local[j].via = "policy_local";
      local[j].result = results[j];
    }
    return { items: local, group: -1 };
  }

  /**
   * The request was refused: units that committed (none of their own checks refused) give back what
   * they took, so a refused request consumes from none of its limits, on any node.
   */
  private async refundAll(units: Unit[]): Promise<void> {
    const refunds: Promise<void>[] = [];
    for (const u of units) {
      if (u.items.some(blockedStore)) continue; // that unit committed nothing
      const taken = u.items.filter((it) => it.hits > 0 && it.result.allowed);
      if (taken.length === 0) continue;
      const checks = taken.map((it) => it.check!);
      const results = taken.map((it) => it.result);
      if (u.group === -1) this.fallback.refundNow(checks, results);
      // Best effort: a node that fails now keeps the hits (never more than the limit let through).
      else refunds.push(this.store.refund(u.group, checks, results).catch(() => undefined));
      for (const it of taken) {
        it.result = { ...it.result, remaining: Math.min(it.result.remaining + it.hits, it.check!.capacity) };
      }
    }
    await Promise.all(refunds);
  }

  /**
   * Notes from the store's refusals. Only a refusal of a single hit (need 1) says every request on the
   * limit is refused until then, and only one decided against the stored level: a check after another
   * of the same key in this request was decided against the level its earlier hits would leave.
   * nowMs was read before the call, so the note ends no later than the store's own Retry-After.
   */
  private takeNotes(items: Item[], generation: number, nowMs: number): void {
    if (!this.notes) return;
    for (let j = 0; j < items.length; j++) {
      const it = items[j];
      const r = it.result;
      if (it.via !== "store" || r.allowed || it.limit.shadowMode || it.hits > 1 || r.retryAfterMs <= 0) continue;
      const c = it.check!;
      if (sameKeyBefore(items, j)) continue;
      this.notes.set(c.key, {
        algorithm: c.algorithm,
        capacity: c.capacity,
        param: checkParam(c),
        generation,
        untilMs: nowMs + Math.min(r.retryAfterMs, this.notes.maxLifeMs),
        retryAtMs: nowMs + r.retryAfterMs,
        resetAtMs: r.periodEndMs > 0 ? r.periodEndMs : nowMs + r.resetSeconds * 1000,
        periodEndMs: r.periodEndMs,
      });
    }
  }
}

/** An earlier store check of the request on the same key took hits from the level this one saw. */
function sameKeyBefore(items: Item[], j: number): boolean {
  const key = items[j].check!.key;
  for (let i = 0; i < j; i++) {
    const c = items[i].check;
    if (c && c.key === key && c.hits > 0) return true;
  }
  return false;
}

const NO_PLAN: Plan = { metadata: undefined, quota: undefined, quotaCount: 0 };
const UNLIMITED_RESULT: CheckResult = { allowed: true, remaining: UNLIMITED_REMAINING, resetSeconds: 0, retryAfterMs: -1, periodEndMs: 0 };
const NOT_EVALUATED: CheckResult = { allowed: true, remaining: 0, resetSeconds: 0, retryAfterMs: -1, periodEndMs: 0 };

function blockedResult(limit: Limit): CheckResult {
  return { allowed: false, remaining: 0, resetSeconds: UNIT_SECONDS[limit.unit], retryAfterMs: -1, periodEndMs: 0 };
}

function byStore(it: Item): boolean {
  return it.via === "store";
}

/** A non-shadow limit that refused: its descriptor is OVER_LIMIT (the request too, unless in quota mode). */
function refuses(it: Item): boolean {
  return !it.result.allowed && !it.limit.shadowMode;
}

/** A check whose refusal made the store consume nothing in its call (lua/apply.lua's rule). */
function blockedStore(it: Item): boolean {
  return !it.result.allowed && !it.check!.shadow;
}

/**
 * The reference's rule: refused when a limit of an ordinary descriptor refused, or when every
 * quota-mode descriptor has a limit that refused.
 */
function requestRefused(items: Item[], plan: Plan): boolean {
  const quota = plan.quota;
  if (!quota) return items.some(refuses);
  let over: Uint8Array | undefined;
  let overCount = 0;
  for (const it of items) {
    if (!refuses(it)) continue;
    if (quota[it.index] === 0) return true;
    over ??= new Uint8Array(quota.length);
    if (over[it.index] === 0) {
      over[it.index] = 1;
      overCount++;
    }
  }
  return overCount === plan.quotaCount;
}

/** Retry-After ms of refusals that must all clear: the latest; -1 (never) wins. */
function latest(a: number, b: number): number {
  return a === -1 || b === -1 ? -1 : Math.max(a, b);
}

/**
 * Statuses per descriptor and the overall answer. A status is its limits' own verdict: a quota-mode
 * descriptor over its limit is OVER_LIMIT in a request that passes, as in the reference. Retry-After:
 * every refusal of an ordinary descriptor must clear; when all quota-mode descriptors refused, the
 * first of them to clear is enough. Global shadow mode answers OK where the request is refused.
 */
function decide(n: number, items: Item[], plan: Plan, globalShadow: boolean): Decision {
  const statuses: DescriptorDecision[] = new Array(n);
  const outcomes: LimitOutcome[] = new Array(items.length);
  const quota = plan.quota;
  // Per quota-mode descriptor that refused: ms until its refusals clear (-1 never), its quotas' period end.
  let quotaRetry: number[] | undefined;
  let quotaEnd: number[] | undefined;
  let quotaOver = 0;
  let retryMs = 0;
  let quotaResetsAtMs = 0;
  for (let j = 0; j < items.length; j++) {
    const it = items[j];
    const r = it.result;
    const refused = refuses(it);
    outcomes[j] = { index: it.index, limit: it.limit, hits: it.hits, allowed: r.allowed, remaining: refused || r.allowed ? r.remaining : 0, via: it.via };
    const status = toStatus(it, refused);
    statuses[it.index] = moreRestrictive(statuses[it.index], status);
    if (!refused) continue;
    const end = it.limit.algorithm === "quota" && r.periodEndMs > 0 ? r.periodEndMs : 0;
    const k = it.index;
    if (quota !== undefined && quota[k] === 1) {
      quotaRetry ??= new Array(n);
      quotaEnd ??= new Array(n).fill(0);
      if (quotaRetry[k] === undefined) quotaOver++;
      quotaRetry[k] = latest(quotaRetry[k] ?? 0, r.retryAfterMs);
      quotaEnd[k] = Math.max(quotaEnd[k], end);
      continue;
    }
    retryMs = latest(retryMs, r.retryAfterMs);
    quotaResetsAtMs = Math.max(quotaResetsAtMs, end);
  }
  if (quotaOver > 0 && quotaOver === plan.quotaCount) {
    let first: number | undefined;
    let firstEnd = 0;
    for (let k = 0; k < n; k++) {
      const t = quotaRetry![k];
      if (t === undefined) continue;
      if (first === undefined || (t !== -1 && (first === -1 || t < first))) {
        first = t;
        firstEnd = quotaEnd![k];
      }
    }
    retryMs = latest(retryMs, first!);
    quotaResetsAtMs = Math.max(quotaResetsAtMs, firstEnd);
  }
  for (let i = 0; i < n; i++) statuses[i] ??= { code: "OK", remaining: 0 };
  const refused = requestRefused(items, plan);
  const decision: Decision = { code: refused && !globalShadow ? "OVER_LIMIT" : "OK", statuses, outcomes };
  if (refused && globalShadow) {
    decision.shadowed = true;
  } else if (refused) {
    if (retryMs > 0) decision.retryAfterSeconds = Math.max(Math.ceil(retryMs / 1000), 1);
    if (quotaResetsAtMs > 0) decision.quotaResetsAtMs = quotaResetsAtMs;
  }
  if (plan.metadata) decision.metadata = plan.metadata;
  return decision;
}

function toStatus(it: Item, refused: boolean): DescriptorDecision {
  const r = it.result;
  if (it.limit.unlimited) return { code: "OK", limit: it.limit, remaining: UNLIMITED_REMAINING };
  // A shadow limit that would refuse reports OK with nothing left.
  if (!refused) return { code: "OK", limit: it.limit, remaining: r.allowed ? r.remaining : 0, resetSeconds: r.resetSeconds };
  // Nothing is left for this request: x-ratelimit-remaining 0 on a 429, as the reference reports.
  return { code: "OVER_LIMIT", limit: it.limit, remaining: 0, resetSeconds: r.resetSeconds, retryAfterMs: r.retryAfterMs };
}

/** The refusing limit that frees up last wins; among passing limits, the one with the least left. */
function moreRestrictive(a: DescriptorDecision | undefined, b: DescriptorDecision): DescriptorDecision {
  if (!a) return b;
  if (a.code !== b.code) return a.code === "OVER_LIMIT" ? a : b;
  if (a.code === "OVER_LIMIT") {
    const ra = a.retryAfterMs ?? -1;
    const rb = b.retryAfterMs ?? -1;
    if (ra === -1) return a;
    if (rb === -1) return b;
    return rb > ra ? b : a;
  }
  return b.remaining < a.remaining ? b : a;
}
