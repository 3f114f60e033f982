// Refusals per rule, summarised in this process and sent to the store at most once a second (one call):
// per rule the refusals, the distinct clients (members for the store's HyperLogLog) and a Space-Saving
// summary of the most refused clients. Nothing here runs for an allowed request; a refusal costs a
// WeakMap lookup, a label, a Set add and an O(1) summary step. Every part is bounded.
import type { Limit } from "../rules/model.js";
import type { Decision, DescriptorEntry, RateLimitRequest } from "../limiter/types.js";
import type { Store } from "../store/store.js";
import type { SummaryWrite } from "../store/summaries.js";
import { ClientLabels } from "./client.js";
import { SpaceSaving } from "./space-saving.js";
import { bucketKey, summaryTag, ttlSeconds, WINDOWS } from "./windows.js";

/** Clients a rule's Space-Saving summary holds per flush. */
const TOP_PER_RULE = 64;
/** Clients a rule's top list keeps per bucket in the store. */
const TOP_KEPT = 100;
/** Rules a bucket's index keeps (the most refusing). */
export const RULES_KEPT = 10_000;
/** Rules summarised per flush at most; refusals of further rules in that second are dropped (counted). */
const RULES_PER_FLUSH = 1_000;
/** Distinct clients sent per rule and flush at most, and in all (past it: not counted as distinct). */
const DISTINCT_PER_RULE = 10_000;
const DISTINCT_PER_FLUSH = 50_000;
const FLUSH_MS = 1000;

/** The member a rule is known by in the store: domain, rule and limit (e.g. "120/MINUTE"). */
export interface RuleRef {
  domain: string;
  rule: string;
  limit: string;
}

export function ruleId(r: RuleRef): string {
  return JSON.stringify([r.domain, r.rule, r.limit]);
}

export function parseRuleId(id: string): RuleRef | undefined {
  try {
    const [domain, rule, limit] = JSON.parse(id);
    return typeof domain === "string" && typeof rule === "string" && typeof limit === "string" ? { domain, rule, limit } : undefined;
  } catch {
    return undefined;
  }
}

function limitText(l: Limit): string {
  return `${l.requestsPerUnit}/${l.unit.toUpperCase()}`;
}

interface Activity {
  id: string;
  refused: number;
  distinct: Set<string>;
  top: SpaceSaving;
  /** In this flush's list already. */
  listed: boolean;
}

interface RefusalSummariesOptions {
  store: Store;
  keyPrefix: string;
  secretKeys: readonly string[];
  hashKey: string;
  /** A rule's path as shown: one holding a secret key's value hashed (core/secret.ts SecretValues.path). */
  rulePath?: (l: Limit) => string;
  now?: () => number;
  /** A flush that failed (the store down): its refusals are lost, the next flush starts afresh. */
  onError?: (err: unknown) => void;
}

export class RefusalSummaries {
  private readonly byLimit = new WeakMap<Limit, Activity>();
  private active: Activity[] = [];
  private distinctTotal = 0;
  private readonly labels: ClientLabels;
  private readonly store: Store;
  private readonly group: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  /** Refusals not summarised because a bound was reached (rules per flush). */
  dropped = 0;

  constructor(private readonly o: RefusalSummariesOptions) {
    this.store = o.store;
    this.labels = new ClientLabels(o.secretKeys, o.hashKey);
    this.group = o.store.groupOf(summaryTag(o.keyPrefix));
    this.now = o.now ?? Date.now;
  }

  /** A store that keeps summaries: only then is there anything to do. */
  static supported(store: Store): boolean {
    return typeof store.writeSummaries === "function" && typeof store.readSummaries === "function";
  }

  /** A decided call (CallObserver.decided): refusals only; an allowed answer returns at the first test. */
  observe(req: RateLimitRequest, d: Decision): void {
    if (d.code !== "OVER_LIMIT" && !d.shadowed) return;
    const outcomes = d.outcomes;
    for (let i = 0; i < outcomes.length; i++) {
      const o = outcomes[i];
      if (!o.allowed && o.limit.label !== "override") this.refused(req.domain, o.limit, req.descriptors[o.index].entries);
    }
  }

  /**
   * `count` refusals of one client by one limit: one per refused call, or the denied requests an RLQS usage report
   * carries for a bucket (one weighted summary step, not `count` of them). A count below 1 is nothing.
   */
  refused(domain: string, limit: Limit, entries: readonly DescriptorEntry[], count = 1): void {
    if (!(count >= 1)) return;
    const n = Math.min(Math.floor(count), Number.MAX_SAFE_INTEGER);
    let a = this.byLimit.get(limit);
    if (!a) {
      a = {
        id: ruleId({ domain, rule: this.o.rulePath ? this.o.rulePath(limit) : limit.path, limit: limitText(limit) }),
        refused: 0,
        distinct: new Set(),
        top: new SpaceSaving(TOP_PER_RULE),
        listed: false,
      };
      this.byLimit.set(limit, a);
    }
    if (!a.listed) {
      if (this.active.length >= RULES_PER_FLUSH) {
        this.dropped += n;
        return;
      }
      a.listed = true;
      this.active.push(a);
    }
    a.refused += n;
    const client = this.labels.label(entries);
    a.top.add(client, n);
    if (a.distinct.size < DISTINCT_PER_RULE && this.distinctTotal < DISTINCT_PER_FLUSH && !a.distinct.has(client)) {
      a.distinct.add(client);
      this.distinctTotal++;
    }
  }

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), FLUSH_MS).unref();
  }

  /** Sends what was summarised since the last flush in one store call; while one is still out, nothing more is sent. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    const writes = this.take();
    if (writes.length === 0) return Promise.resolve();
    this.flushing = this.store.writeSummaries!(this.group, writes)
      .catch((err) => this.o.onError?.(err))
      .finally(() => {
        this.flushing = undefined;
      });
    return this.flushing;
  }

  /** Stops the timer and sends the last refusals. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flushing;
    await this.flush();
  }

  /** The writes for everything since the last flush; resets the summaries. */
  private take(): SummaryWrite[] {
    const active = this.active;
    if (active.length === 0) return [];
    this.active = [];
    this.distinctTotal = 0;
    const nowMs = this.now();
    const writes: SummaryWrite[] = [];
    for (const w of WINDOWS) {
      const bucket = Math.floor(nowMs / w.bucketMs);
      const ttl = ttlSeconds(w);
      const k = (part: "rules" | "d" | "t", id?: string) => bucketKey(this.o.keyPrefix, w, bucket, part, id);
      writes.push({
        kind: "counts",
        key: k("rules"),
        members: active.map((a) => a.id),
        counts: active.map((a) => a.refused),
        keep: RULES_KEPT,
        ttlSeconds: ttl,
      });
      for (const a of active) {
        writes.push({ kind: "distinct", key: k("d", a.id), members: [...a.distinct], ttlSeconds: ttl });
        const top = a.top.entries(true); // lower bounds: a rule refusing many clients shows no inflated counts
        writes.push({ kind: "counts", key: k("t", a.id), members: top.map((e) => e[0]), counts: top.map((e) => e[1]), keep: TOP_KEPT, ttlSeconds: ttl });
      }
    }
    for (const a of active) {
      a.refused = 0;
      a.distinct.clear();
      a.top.clear();
      a.listed = false;
    }
    return writes;
  }
}
