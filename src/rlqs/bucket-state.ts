// One bucket of one RLQS stream: what the rules say of it, the demand Envoy reports, its current
// assignment, and the ledger of the units it holds in the store's current window (lease-math.ts).
import type { BucketEntry } from "../core/bucket-id.js";
import type { RuleSet } from "../rules/model.js";
import type { BucketRule } from "./buckets.js";
import type { TokenBucketSpec } from "./wire.js";

/** An assignment whose units may still be spent by Envoy. */
export interface LiveLease {
  budget: number;
  /**
   * Local ms after which Envoy surely stopped admitting under it (its end, or its replacement's arrival, plus
   * SETTLE_MS): a report received after this holds all it admitted, and the lease leaves the ledger.
   */
  settleAfterMs: number;
}

/** Margin for Envoy's timer starting on arrival and for a report's transit: see LiveLease.settleAfterMs. */
export const SETTLE_MS = 1250;

export interface CurrentLease {
  spec: TokenBucketSpec;
  /** Tokens a second (0: a burst lease, no refill worth a token in its life). */
  rate: number;
  /** The rate asked for (the store may have given less): a new lease only when the demand moves from it. */
  asked: number;
  startMs: number;
  /** Local ms: Envoy's time to live ends by here (plus SLACK_MS). */
  endMs: number;
  live: LiveLease;
}

export class BucketState {
  rules: RuleSet | undefined = undefined;
  rule: BucketRule = { kind: "none" };
  /** A rule matched it once: when none does any more, Envoy is told to abandon it. */
  matched = false;
  /** Requests a second (allowed and denied) in the last report; -1 before the second report. */
  demand = -1;
  /** Local ms of the last report with requests, and of the bucket's first report. */
  activeAtMs: number;
  /** The last blanket answer sent (allow / deny) and until when it holds (local ms). */
  blanket: "allow" | "deny" | undefined = undefined;
  blanketEndMs = 0;
  /** The time to live (whole seconds) the last assignment was sent with. */
  ttlSent = 0;
  /** Denied at the limit: the next lease is asked for from here (local ms). */
  retryAtMs = 0;
  lease: CurrentLease | undefined = undefined;
  /** Ledger of the store window: its end (local ms, 0: no window), per check units charged, reported admitted, live budgets. */
  windowEndMs = 0;
  periodEndMs = 0;
  charged: number[] = [];
  allowed = 0;
  live: LiveLease[] = [];
  /** What the store had left at its last answer (smallest over the checks), and which check had it. */
  storeRemaining = Number.MAX_SAFE_INTEGER;
  tightest = 0;
  /** A store call for it is in flight: nothing else is decided for it meanwhile. */
  busy = false;
  /** Assignments sent, to tell Envoy's token buckets apart (fill_interval nanos). */
  epoch = 0;

  /** Requests counted since sinceMs, towards the next demand figure. */
  private counted = 0;
  private sinceMs: number;

  constructor(
    readonly entries: BucketEntry[],
    readonly text: string,
    nowMs: number,
  ) {
    this.activeAtMs = nowMs;
    this.sinceMs = nowMs;
  }

  /** Requests (allowed and denied) of a report: the demand, once they span at least minSpanMs. */
  count(requests: number, nowMs: number, minSpanMs: number): void {
    if (requests > 0) this.activeAtMs = nowMs;
    this.counted += requests;
    const span = nowMs - this.sinceMs;
    if (span < minSpanMs) return;
    this.demand = (this.counted * 1000) / span;
    this.counted = 0;
    this.sinceMs = nowMs;
  }

  /** The window ended: its units are worth nothing now, its ledger starts again. */
  resetWindow(checks: number, capacity = Number.MAX_SAFE_INTEGER): void {
    this.windowEndMs = 0;
    this.periodEndMs = 0;
    this.charged = new Array(checks).fill(0);
    this.allowed = 0;
    this.live = [];
    this.storeRemaining = capacity;
    this.lease = undefined;
  }

  /** A report came: assignments that ended before it (with the margin) are settled and leave the ledger. */
  reported(allowed: number, nowMs: number): void {
    this.allowed += allowed;
    if (this.live.some((l) => nowMs > l.settleAfterMs)) this.live = this.live.filter((l) => nowMs <= l.settleAfterMs);
  }

  liveBudgets(): number {
    let n = 0;
    for (const l of this.live) n += l.budget;
    return n;
  }

  /** The current assignment stops being current (replaced, or the bucket denied): Envoy drops it on the next answer's arrival. */
  retire(nowMs: number): void {
    if (this.lease) this.lease.live.settleAfterMs = Math.min(this.lease.live.settleAfterMs, nowMs + SETTLE_MS);
    this.lease = undefined;
  }
}
