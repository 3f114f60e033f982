// One RLQS stream: usage reports in, assignments out. Each report updates its buckets' demand and ledger
// (bucket-state.ts); then every bucket is looked at (tick): a bucket no rule matches gets the default
// (allow all), a rule of 0 requests denies all, a counted rule gets a lease: a fresh one (a new token
// bucket in Envoy: units for `rate` a second over its time to live), or an extension of the current one
// (same parameters: Envoy keeps its bucket and extends its life), taken in one store call per store group
// together with the units that can go back. Between reports a timer starts each new window's leases.
import { UNIT_SECONDS } from "../counters/limit.js";
import type { LeaseEntry, LeaseReply } from "../store/store.js";
import { takeLeases } from "../approximate/take.js";
import { FALLBACK_GROUP } from "../limiter/policy.js";
import { bucketText } from "../core/bucket-id.js";
import type { StreamCall, StreamEnd, StreamHandler } from "../server/grpc/stream-contract.js";
import type { RlqsBucketView } from "../inspect/rules-json.js";
import type { RuleSet } from "../rules/model.js";
import { bucketRule } from "./buckets.js";
import { BucketState, SETTLE_MS } from "./bucket-state.js";
import { freshWant, isBurst, rateBudget, rateChanged, rateFor, spareUnits, targetRate, ttlSeconds } from "./lease-math.js";
import { DEFAULT_TTL_SECONDS, type RlqsContext } from "./context.js";
import { decodeUsageReports, encodeResponse, MalformedReport, type BucketAction } from "./wire.js";

const INVALID_ARGUMENT = 3;
const RESOURCE_EXHAUSTED = 8;
/** An extension is sent only while the current assignment surely still runs in Envoy when it arrives. */
const EXTEND_SAFETY_MS = 300;
/** Demand is measured over at least this long (Envoy sends a bucket's first report at once, then on its interval). */
const MIN_DEMAND_SPAN_MS = 400;
/** A new window's leases are taken this long after the store's window ended (local clock, measured from the store's). */
const WINDOW_START_DELAY_MS = 20;
/**
 * An assignment is renewed (by sluice's own timer: Envoy 1.40 reports every 5 s whatever its reporting_interval
 * says) this long before it ends, so the renewal arrives while it still runs.
 */
const RENEW_LEAD_MS = 1200;
/** A burst lease is replaced only this close to its end: its tokens are lost when it is (a new bucket in Envoy). */
const BURST_LEAD_MS = 150;
/** A bucket denied at the limit asks again this often: units other Envoys did not use come back meanwhile. */
const AT_LIMIT_RETRY_MS = 1000;

interface Planned {
  b: BucketState;
  kind: "fresh" | "extend";
  rate: number;
  ttl: number;
  entries: LeaseEntry[];
  backs: number[];
}

export class RlqsStream implements StreamHandler {
  domain = "";
  private readonly buckets = new Map<string, BucketState>();
  private lastReportMs = 0;
  /** Envoy's reporting interval as observed (ms); Envoy 1.40's is a fixed 5 s. */
  private intervalMs = 5000;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = 0;
  private over = false;

  constructor(
    private readonly svc: RlqsContext,
    private readonly call: StreamCall,
  ) {}

  async message(bytes: Buffer): Promise<void> {
    const svc = this.svc;
    let reports;
    try {
      reports = decodeUsageReports(bytes, svc.maxBucketsPerStream);
    } catch (err) {
      if (!(err instanceof MalformedReport)) throw err;
      return this.call.end(INVALID_ARGUMENT, `malformed usage report: ${err.message}`);
    }
    if (reports.domain !== "") {
      if (this.domain !== "" && reports.domain !== this.domain) {
        return this.call.end(
          INVALID_ARGUMENT,
          `the domain changed from ${this.domain} to ${reports.domain.slice(0, 128)} on one stream: open a new stream for another domain`,
        );
      }
      this.domain = reports.domain;
    }
    if (this.domain === "") return this.call.end(INVALID_ARGUMENT, "the first usage report of a stream must name its domain");
    const now = svc.now();
    if (this.lastReportMs > 0 && now - this.lastReportMs >= MIN_DEMAND_SPAN_MS) this.intervalMs = now - this.lastReportMs;
    this.lastReportMs = now;
    for (const u of reports.usages) {
      const text = bucketText(u.entries);
      let b = this.buckets.get(text);
      if (!b) {
        if (this.buckets.size >= svc.maxBucketsPerStream) {
          return this.call.end(RESOURCE_EXHAUSTED, `a stream may report at most ${svc.maxBucketsPerStream} buckets (MAX_BUCKETS_PER_STREAM)`);
        }
        b = new BucketState(u.entries, text, now);
        this.buckets.set(text, b);
        svc.counters.buckets++;
      }
      b.count(u.allowed + u.denied, now, MIN_DEMAND_SPAN_MS);
      this.rollWindow(b, now);
      b.reported(u.allowed, now);
      if (u.denied > 0) {
        svc.counters.deniedReported += u.denied;
        this.deniedBy(b, u.denied, now);
      }
    }
    await this.tick();
  }

  closed(_why: StreamEnd): void {
    this.over = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.svc.counters.buckets -= this.buckets.size;
    this.buckets.clear();
    this.svc.gone(this);
  }

  /** Appends this stream's buckets to `out` while it holds fewer than `max`. */
  describe(out: RlqsBucketView[], max: number): void {
    const now = this.svc.now();
    for (const b of this.buckets.values()) {
      if (out.length >= max) return;
      const assignment = b.lease
        ? `lease ${b.lease.rate > 0 ? `${b.lease.rate}/s` : `${b.lease.spec.maxTokens} units`}`
        : b.blanket === "deny"
          ? "DENY_ALL"
          : b.blanket === "allow"
            ? "ALLOW_ALL"
            : "none";
      const endMs = b.lease ? b.lease.endMs : b.blanket ? b.blanketEndMs : now;
      out.push({
        domain: this.domain,
        bucket: Object.fromEntries(b.entries.map((e) => [e.key, e.value])),
        demand: Math.round(Math.max(0, b.demand) * 100) / 100,
        assignment,
        ttl_seconds: assignment === "none" ? 0 : b.ttlSent,
        remaining_ms: Math.max(0, Math.round(endMs - now)),
      });
    }
  }

  /**
   * Requests Envoy reported denying in a bucket, told to onDenied (/top counts them as refusals) against the limit
   * that denies: the bucket's limit of 0, or of its leased limits the one with least left at the store's last
   * answer. A bucket no rule counts (none, unlimited, shadow) names no limit: only the metric counts it.
   */
  private deniedBy(b: BucketState, denied: number, now: number): void {
    const tell = this.svc.o.onDenied;
    if (!tell) return;
    // A bucket new in this report has its rule only once looked up (one with a store call out keeps its own).
    if (!b.busy) this.refreshRule(b, this.svc.o.rules(), now);
    const r = b.rule;
    const limit =
      r.kind === "leases"
        ? (r.limits[b.tightest] ?? r.limits[0])
        : r.kind === "deny"
          ? r.limits.find((l) => l.requestsPerUnit === 0 && !l.unlimited)
          : undefined;
    if (limit) tell(this.domain, limit, b.entries, denied);
  }

  /** The bucket's rule under the rules in force (looked up again only when they changed). */
  private refreshRule(b: BucketState, rules: RuleSet, now: number): void {
    if (b.rules === rules) return;
    b.rules = rules;
    b.rule = bucketRule(rules, this.domain, b.entries, this.svc.o.store, this.svc.o.keyPrefix, now);
    const checks = b.rule.kind === "leases" ? b.rule.checks.length : 0;
    if (b.charged.length !== checks) b.resetWindow(checks, capacityOf(b));
  }

  /** The store's window of the bucket ended: a new ledger (its leases ended before the window did). */
  private rollWindow(b: BucketState, now: number): void {
    if (b.windowEndMs > 0 && now >= b.windowEndMs) b.resetWindow(b.charged.length, capacityOf(b));
  }

  /** Looks at every bucket; sends what changed; takes the leases due in one store call per group. */
  private async tick(): Promise<void> {
    if (this.over) return;
    const svc = this.svc;
    const now = svc.now();
    const rules = svc.o.rules();
    const actions: BucketAction[] = [];
    const planned: Planned[] = [];
    for (const [text, b] of this.buckets) {
      if (b.busy) continue;
      this.rollWindow(b, now);
      this.refreshRule(b, rules, now);
      const idle = now - b.activeAtMs > Math.max(svc.idleAbandonMs, 3 * this.intervalMs);
      if (idle || (b.rule.kind === "none" && b.matched)) {
        // Unused for long, or its rule is gone: Envoy forgets the bucket (its units stay counted until the window ends).
        actions.push({ entries: b.entries, kind: "abandon" });
        this.buckets.delete(text);
        svc.counters.buckets--;
        continue;
      }
      if (b.rule.kind !== "none") b.matched = true;
      if (b.rule.kind !== "leases") {
        this.blanket(b, b.rule.kind === "deny" ? "deny" : "allow", now, actions);
        continue;
      }
      const p = this.plan(b, now);
      if (p) planned.push(p);
    }
    if (actions.length > 0) this.send(actions);
    if (planned.length > 0) await this.takeAll(planned);
    this.arm();
  }

  private ttlCap(b: BucketState): number {
    const rule = b.rule.kind === "leases" ? b.rule.limits[0] : undefined;
    const sync = rule?.approximate ? Math.ceil(rule.approximate.syncIntervalMs / 1000) : DEFAULT_TTL_SECONDS;
    // Whole seconds: Envoy reads only the seconds (0 would expire at once).
    return Math.max(1, sync);
  }

  private blanket(b: BucketState, kind: "allow" | "deny", now: number, actions: BucketAction[]): void {
    const ttl = this.ttlCap(b);
    if (b.blanket === kind && b.blanketEndMs - now > RENEW_LEAD_MS) return;
    b.retire(now);
    b.blanket = kind;
    b.blanketEndMs = now + ttl * 1000;
    b.ttlSent = ttl;
    actions.push({ entries: b.entries, kind: "blanket", deny: kind === "deny", ttlSeconds: ttl });
  }

  /** What the bucket needs from the store now, if anything: a fresh lease, or more life for the current one. */
  private plan(b: BucketState, now: number): Planned | undefined {
    if (b.rule.kind !== "leases") return undefined;
    const cap = this.ttlCap(b);
    const limit = b.rule.limits[0];
    const initial = Math.max(1, Math.floor((limit.requestsPerUnit / UNIT_SECONDS[limit.unit]) * 0.25));
    const rate = b.demand < 0 ? initial : targetRate(b.demand);
    const cur = b.lease;
    const renewBefore = RENEW_LEAD_MS;
    let kind: "fresh" | "extend" = "fresh";
    let want: number;
    let ttl = ttlSeconds(now, cap, b.windowEndMs);
    // The store had nothing left at the last try: units come back only as other leases settle.
    if (now < b.retryAtMs) return this.giveBackOnly(b, now);
    if (cur && cur.rate > 0 && now < cur.endMs - EXTEND_SAFETY_MS && !rateChanged(cur.asked, rate)) {
      if (cur.endMs - now > renewBefore) return this.giveBackOnly(b, now);
      const newEnd = now + ttl * 1000;
      if (newEnd <= cur.endMs) return this.giveBackOnly(b, now);
      kind = "extend";
      want = rateBudget(cur.rate, newEnd - cur.startMs) - cur.live.budget;
    } else {
      if (cur && cur.rate === 0 && now < cur.endMs - BURST_LEAD_MS) return this.giveBackOnly(b, now);
      if (b.demand === 0 && cur === undefined && b.blanket === "deny") return undefined;
      if (b.windowEndMs > 0 && ttl < 1) return undefined; // the window's end is too near: the next window's lease follows
      if (b.windowEndMs === 0) ttl = cap;
      // Units this call gives back count as left: they go back before the take (lua/lease.lua).
      want = freshWant(rate, b.demand, ttl, b.storeRemaining + this.spare(b));
    }
    return this.entries(b, kind, rate, ttl, want, now);
  }

  /** No take due; units that can go back wait for the next call, unless they are a good part of the limit. */
  private giveBackOnly(b: BucketState, now: number): Planned | undefined {
    if (b.rule.kind !== "leases") return undefined;
    const spare = this.spare(b);
    // Near the limit every unit counts: other Envoys may be denied for want of it.
    const capacity = b.rule.checks[0].capacity;
    if (spare < 1 || (spare < capacity * 0.05 && b.storeRemaining >= capacity * 0.1)) return undefined;
    return this.entries(b, "extend", b.lease?.rate ?? 0, 0, 0, now);
  }

  private spare(b: BucketState): number {
    if (b.charged.length === 0 || (b.windowEndMs > 0 && this.svc.now() >= b.windowEndMs)) return 0;
    return spareUnits(Math.min(...b.charged), b.allowed, b.liveBudgets());
  }

  private entries(b: BucketState, kind: "fresh" | "extend", rate: number, ttl: number, want: number, now: number): Planned {
    const rule = b.rule as Extract<typeof b.rule, { kind: "leases" }>;
    const windowOpen = b.windowEndMs === 0 || now < b.windowEndMs;
    const live = b.liveBudgets();
    const backs = rule.checks.map((_, i) => (windowOpen ? spareUnits(b.charged[i], b.allowed, live) : 0));
    const entries = rule.checks.map((check, i) => ({ check, want: Math.max(0, want), need: 1, back: backs[i], backEndMs: b.periodEndMs }));
    return { b, kind, rate, ttl, entries, backs };
  }

  private async takeAll(planned: Planned[]): Promise<void> {
    const byGroup = new Map<number, Planned[]>();
    for (const p of planned) {
      p.b.busy = true;
      const g = (p.b.rule as { group: number }).group;
      const list = byGroup.get(g);
      if (list) list.push(p);
      else byGroup.set(g, [p]);
    }
    await Promise.all([...byGroup].map(([g, list]) => this.takeGroup(g, list)));
  }

  private async takeGroup(group: number, list: Planned[]): Promise<void> {
    const svc = this.svc;
    const sentMs = svc.now();
    let reply: LeaseReply | undefined;
    try {
      svc.counters.storeCalls++;
      reply = await takeLeases(
        svc.o.store,
        group,
        list.flatMap((p) => p.entries),
      );
    } catch (err) {
      svc.o.logger.debug({ err }, "RLQS: a lease call failed; the rules' failure modes answer");
    }
    const actions: BucketAction[] = [];
    const local: Planned[] = [];
    let at = 0;
    for (const p of list) {
      const results = reply?.results.slice(at, at + p.entries.length);
      at += p.entries.length;
      if (!this.over && (!reply || !results) && failureMode(p) === "local" && svc.o.fallback) {
        local.push(p);
        continue;
      }
      p.b.busy = false;
      if (this.over) continue;
      if (!reply || !results) this.failed(p, actions);
      else this.install(p, results, reply.nowUs, sentMs, actions);
    }
    if (local.length > 0) await this.takeLocal(local, actions);
    if (actions.length > 0) this.send(actions);
  }

  /**
   * The store failed for buckets whose rule says failure_mode local: their leases come from the in-process
   * fallback the limiter counts `local` limits in (each sluice counts apart, as there). Nothing went back to the
   * store, and what the fallback gives is not the store's: the ledger is left as it was (its give-backs wait).
   */
  private async takeLocal(list: Planned[], actions: BucketAction[]): Promise<void> {
    const svc = this.svc;
    const sentMs = svc.now();
    let reply: LeaseReply | undefined;
    try {
      reply = await takeLeases(
        svc.o.fallback!,
        FALLBACK_GROUP,
        list.flatMap((p) => p.entries.map((e) => ({ ...e, back: 0 }))),
      );
    } catch (err) {
      svc.o.logger.warn({ err }, "RLQS: the local fallback failed a lease call");
    }
    let at = 0;
    for (const p of list) {
      p.b.busy = false;
      const results = reply?.results.slice(at, at + p.entries.length);
      at += p.entries.length;
      if (this.over || !reply || !results) continue; // Envoy keeps its assignment until it expires
      this.install(p, results, reply.nowUs, sentMs, actions, true);
    }
  }

  /** The store failed: the rule's failure mode answers (allow or deny for a while; otherwise Envoy keeps what it has). */
  private failed(p: Planned, actions: BucketAction[]): void {
    const mode = failureMode(p);
    if (mode === "allow" || mode === "deny") this.blanket(p.b, mode, this.svc.now(), actions);
  }

  /** `local`: the units came from the local fallback, not the store: the store's ledger is not touched. */
  private install(p: Planned, results: LeaseReply["results"], storeNowUs: number, sentMs: number, actions: BucketAction[], local = false): void {
    const { b } = p;
    const c = this.svc.counters;
    const now = this.svc.now();
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
      const until = b.windowEndMs > now ? Math.max(1, Math.ceil((b.windowEndMs - now) / 1000)) : this.ttlCap(b);
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

  private send(actions: BucketAction[]): void {
    const c = this.svc.counters;
    for (const a of actions) {
      if (a.kind === "abandon") {
        c.abandonsSent++;
        continue;
      }
      c.assignmentsSent++;
      if (a.kind === "blanket" && a.deny) c.denyAllSent++;
    }
    this.call.send(encodeResponse(actions));
  }

  /** Wakes at the earliest window end of a bucket with a lease or recent requests: its next window's lease. */
  private arm(): void {
    if (this.over) return;
    let at = Infinity;
    const now = this.svc.now();
    for (const b of this.buckets.values()) {
      if (b.windowEndMs > now) at = Math.min(at, b.windowEndMs + WINDOW_START_DELAY_MS);
      if (b.lease) at = Math.min(at, b.lease.endMs - (b.lease.rate > 0 ? RENEW_LEAD_MS : BURST_LEAD_MS) + 10);
      if (b.blanket) at = Math.min(at, b.blanketEndMs - RENEW_LEAD_MS + 10);
      if (b.retryAtMs > now) at = Math.min(at, b.retryAtMs);
    }
    if (at === Infinity) return;
    at = Math.max(at, now + 50);
    if (this.timer && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.tick().catch((err) => this.svc.o.logger.error({ err }, "RLQS: a window's leases failed"));
    }, at - now);
    this.timer.unref();
  }
}

/** The failure mode of a planned bucket's rule (its first counted limit's). */
function failureMode(p: Planned): string | undefined {
  return p.b.rule.kind === "leases" ? p.b.rule.limits[0].failureMode : undefined;
}

/** The first limit's capacity: what a window starts with, before the store's first answer says what is left. */
function capacityOf(b: BucketState): number {
  return b.rule.kind === "leases" ? b.rule.checks[0].capacity : Number.MAX_SAFE_INTEGER;
}
