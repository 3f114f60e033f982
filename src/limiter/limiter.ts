// The decision: rules -> limits -> one atomic store call per store group -> per-descriptor statuses.
// Knows nothing of gRPC or of Redis commands. shouldRateLimit tells one request's story in order; the
// steps are helpers that call no step back: match-request.ts, plan.ts, the check (approximate-use.ts,
// deny-note-steps.ts, evaluate.ts, policy.ts when a store node fails), decide.ts, rate-limit-headers.ts.
import type { SecretValues } from "../core/secret.js";
import { SETTINGS } from "../core/settings-table.js";
import type { RuleSet } from "../rules/model.js";
import { systemClock, type Clock } from "../store/clock.js";
import { MemoryStore } from "../store/memory.js";
import type { Store } from "../store/store.js";
import type { Leases } from "../approximate/leases.js";
import { decideApproximate, giveBackApproximate, type ApproximateTicket } from "./approximate-use.js";
import { decide, requestRefused } from "./decide.js";
import { DEFAULT_DENY_NOTE_MAX_ENTRIES, DEFAULT_DENY_NOTE_MAX_MS, DenyNotes } from "./deny-note.js";
import { evaluate, refundAll } from "./evaluate.js";
import type { Item, Plan, ProbeTicket } from "./limit-items.js";
import { consultNotes, endProbes, startProbes, takeNotes } from "./deny-note-steps.js";
import { matchRequest } from "./match-request.js";
import { plan } from "./plan.js";
import { rateLimitHeaders, type RateLimitHeaderNames } from "./rate-limit-headers.js";
import type { Decision, RateLimitRequest } from "./types.js";

export { UNLIMITED_REMAINING } from "./limit-items.js";

/** Keys the local fallback (limits with failure_policy local) holds, unless configured (SLUICE_LOCAL_MAX_KEYS). */
export const DEFAULT_LOCAL_MAX_KEYS = SETTINGS.LOCAL_MAX_KEYS.default;

export interface LimiterOptions {
  /** Local clock: quota periods sent to the store, deny note expiry. */
  clock?: Clock;
  /** Where `failure_mode: local` limits are counted while their store node fails: a store in this process. */
  fallback?: Store;
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
  /** Fixed windows count in the reference's keys, as it counts (SLUICE_REFERENCE_KEYS); absent = sluice's keys. */
  referenceKeys?: { countsRefused: boolean };
  /** Starts every store key (--key-prefix; core/keys.ts), so deployments can share one Redis. */
  keyPrefix?: string;
  /** Values of secret descriptor keys go into store keys as their keyed hash (core/secret.ts); absent: none. */
  secrets?: SecretValues;
  /** Add the reference's RateLimit-* headers to every answer with a limit (SLUICE_RESPONSE_HEADERS); off when absent. */
  responseHeaders?: RateLimitHeaderNames;
  /**
   * dynamic_metadata: `rules` (default) the matched rules' metadata by descriptor index; `reference`
   * the reference's (RESPONSE_DYNAMIC_METADATA), built by `referenceMetadata`; `off` none.
   */
  responseMetadata?: ResponseMetadataMode;
  /** Builds the reference's dynamic_metadata (server/reference/reference-metadata.ts); needed with responseMetadata "reference". */
  referenceMetadata?: ReferenceMetadataBuilder;
  /** The leases approximate limits are decided from; absent: they are exact (one store call). */
  approximate?: Leases;
}

export type ResponseMetadataMode = "rules" | "reference" | "off";
/** The request, its statuses and the matched rules' metadata -> the reference's dynamic_metadata object. */
type ReferenceMetadataBuilder = (req: RateLimitRequest, statuses: Decision["statuses"], matched: Decision["metadata"]) => Record<string, unknown>;
const DEFAULT_RESPONSE_METADATA = SETTINGS.RESPONSE_DYNAMIC_METADATA.default satisfies ResponseMetadataMode;

export class Limiter {
  private rules: RuleSet;
  /** Bumped by setRules: a deny note learnt under older rules is not used. */
  private generation = 0;
  private readonly clock: Clock;
  /** Where `failure_mode: local` limits count while their store fails (RLQS leases from it too). */
  readonly fallback: Store;
  private readonly notes: DenyNotes | undefined;
  private readonly globalShadowMode: boolean;
  private readonly globalQuotaMode: boolean;
  private readonly referenceKeys: { countsRefused: boolean } | undefined;
  private readonly keyPrefix: string;
  private readonly secrets: SecretValues | undefined;
  private readonly responseHeaders: RateLimitHeaderNames | undefined;
  private readonly responseMetadata: ResponseMetadataMode;
  private readonly referenceMetadata: ReferenceMetadataBuilder | undefined;
  private readonly approximate: Leases | undefined;

  constructor(
    rules: RuleSet,
    private readonly store: Store,
    opts: LimiterOptions = {},
  ) {
    this.rules = rules;
    this.clock = opts.clock ?? systemClock;
    this.fallback = opts.fallback ?? new MemoryStore({ clock: this.clock, maxKeys: DEFAULT_LOCAL_MAX_KEYS });
    const maxNotes = opts.denyNoteMaxEntries ?? DEFAULT_DENY_NOTE_MAX_ENTRIES;
    if (maxNotes > 0) this.notes = new DenyNotes(maxNotes, opts.denyNoteMaxMs ?? DEFAULT_DENY_NOTE_MAX_MS);
    this.globalShadowMode = opts.globalShadowMode ?? false;
    this.globalQuotaMode = opts.globalQuotaMode ?? false;
    this.referenceKeys = opts.referenceKeys;
    this.keyPrefix = opts.keyPrefix ?? "";
    this.secrets = opts.secrets?.any ? opts.secrets : undefined;
    this.responseHeaders = opts.responseHeaders;
    this.responseMetadata = opts.responseMetadata ?? DEFAULT_RESPONSE_METADATA;
    this.referenceMetadata = opts.referenceMetadata;
    if (this.responseMetadata === "reference" && !this.referenceMetadata) throw new Error("responseMetadata reference needs a referenceMetadata builder");
    this.approximate = opts.approximate;
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

  /** One request, in order: match, plan, check, decide, answer; each step is a helper of its own. */
  async shouldRateLimit(req: RateLimitRequest): Promise<Decision> {
    const nowMs = Math.floor(this.clock.nowMicros() / 1000);
    // Match: each descriptor's limits in force, from its rule or its own override (match-request.ts).
    const matched = matchRequest(req, this.rules, this.globalQuotaMode);
    // Plan: one item per limit, with the store check it needs (plan.ts).
    const items: Item[] = [];
    const planned = plan(req, matched, nowMs, items, this.store, this.keyPrefix, this.approximate !== undefined, this.referenceKeys, this.secrets);
    // Check: what this instance knows first, then the store (below).
    await this.check(items, planned, nowMs);
    // Decide: each descriptor's status and the request's answer (decide.ts).
    const d = decide(req.descriptors.length, items, planned, this.globalShadowMode);
    // Answer: what the settings add (below).
    return this.answer(req, d, planned);
  }

  /**
   * Fills in every item's result. A limit that blocks everything (requests_per_unit: 0) refuses the
   * request already: the store is asked only for the other limits' figures (a dry run, nothing
   * consumed). Approximate limits answer from this instance's leases. Live deny notes for every store
   * limit of the request refuse it without a store call; a request with any other store limit goes to
   * the store, which also keeps its figures true. While another request probes a key whose note
   * expired, its answer decides for this one too (waited for at most twice, so a key that keeps being
   * emptied by its probes costs waiters two round trips at most). A request refused after all consumes
   * nothing: what was taken is given back.
   */
  private async check(items: Item[], planned: Plan, nowMs: number): Promise<void> {
    const generation = this.generation;
    let blocked = requestRefused(items, planned); // store items are not evaluated yet: they count as allowed
    // Approximate limits answer from this instance's leases first (nothing taken when refused already).
    let approximate: ApproximateTicket | undefined;
    if (planned.approximateCount > 0) {
      approximate = await decideApproximate(this.approximate!, items, blocked, this.fallback);
      if (!blocked && requestRefused(items, planned)) {
        blocked = true;
        const call = giveBackApproximate(this.approximate!, approximate);
        if (call) await refundAll([call], this.store, this.fallback);
        approximate = undefined;
      }
    }
    let probes: ProbeTicket[] | undefined;
    for (let waits = 0; !blocked && this.notes; waits++) {
      const probe = consultNotes(this.notes, items, generation, nowMs);
      if (probe === true) {
        // Refused by deny notes: the approximate limits consume nothing either.
        const call = giveBackApproximate(this.approximate!, approximate);
        if (call) await refundAll([call], this.store, this.fallback);
        return;
      }
      if (probe && waits < 2) {
        await probe.done;
        nowMs = Math.floor(this.clock.nowMicros() / 1000);
      } else {
        probes = startProbes(this.notes, items, generation, nowMs);
        break;
      }
    }
    try {
      const storeCalls = await evaluate(items, blocked, this.store, this.fallback);
      if (!blocked && requestRefused(items, planned)) {
        const call = approximate && giveBackApproximate(this.approximate!, approximate);
        await refundAll(call ? [...storeCalls, call] : storeCalls, this.store, this.fallback);
      }
      takeNotes(this.notes, items, generation, nowMs);
    } finally {
      if (probes) endProbes(this.notes!, probes);
    }
  }

  /** What the settings add to a decision: the rate-limit headers, and which dynamic_metadata. */
  private answer(req: RateLimitRequest, d: Decision, plan: Plan): Decision {
    if (this.responseHeaders) {
      const headers = rateLimitHeaders(this.responseHeaders, d.statuses, plan.quota);
      if (headers) d.headers = headers;
    }
    if (this.responseMetadata !== "rules") {
      if (this.responseMetadata === "reference") d.dynamicMetadata = this.referenceMetadata!(req, d.statuses, plan.metadata);
      d.metadata = undefined;
    }
    return d;
  }
}
