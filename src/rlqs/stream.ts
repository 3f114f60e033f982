// One RLQS stream: usage reports in, assignments out. Each report updates its buckets' demand and ledger
// (bucket-state.ts); then every bucket is looked at (tick): a bucket no rule matches gets the default
// (allow all), a rule of 0 requests denies all, a counted rule gets a lease (assignments.ts says which and how
// large), taken in one store call per store group together with the units that can go back. Between reports a
// timer starts each new window's leases.
import type { LeaseReply } from "../store/store.js";
import { takeLeases } from "../approximate/take.js";
import { FALLBACK_GROUP } from "../limiter/policy.js";
import { bucketText } from "../core/bucket-id.js";
import type { StreamCall, StreamEnd, StreamHandler } from "../server/grpc/stream-contract.js";
import type { RlqsBucketView } from "../inspect/rules-json.js";
import type { RuleSet } from "../rules/model.js";
import { blanket, BURST_LEAD_MS, install, plan, type Planned, RENEW_LEAD_MS } from "./assignments.js";
import { bucketRule } from "./buckets.js";
import { BucketState } from "./bucket-state.js";
import type { RlqsContext } from "./context.js";
import { decodeUsageReports, encodeResponse, MalformedReport, type BucketAction } from "./wire.js";

const INVALID_ARGUMENT = 3;
const RESOURCE_EXHAUSTED = 8;
/** Demand is measured over at least this long (Envoy sends a bucket's first report at once, then on its interval). */
const MIN_DEMAND_SPAN_MS = 400;
/** A new window's leases are taken this long after the store's window ended (local clock, measured from the store's). */
const WINDOW_START_DELAY_MS = 20;

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
        blanket(b, b.rule.kind === "deny" ? "deny" : "allow", now, actions);
        continue;
      }
      const p = plan(b, now);
      if (p) planned.push(p);
    }
    if (actions.length > 0) this.send(actions);
    if (planned.length > 0) await this.takeAll(planned);
    this.arm();
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
      else install(p, results, reply.nowUs, sentMs, actions, svc.counters, svc.now());
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
      install(p, results, reply.nowUs, sentMs, actions, this.svc.counters, this.svc.now(), true);
    }
  }

  /** The store failed: the rule's failure mode answers (allow or deny for a while; otherwise Envoy keeps what it has). */
  private failed(p: Planned, actions: BucketAction[]): void {
    const mode = failureMode(p);
    if (mode === "allow" || mode === "deny") blanket(p.b, mode, this.svc.now(), actions);
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
