// Approximate limits (`approximate: {sync_interval_ms: N}`) as leases: an instance admits locally only
// units it has already taken from the store's counter (lua/lease.lua: the algorithm's own check, Redis
// TIME deciding the window), so nothing is admitted that the store did not count first. A lease lives one
// interval of N ms, two in steady use while the limit has ample room, never past its window's end. At its
// end, unused in its last interval, its unused units go back; used, they go back and the next lease is taken
// in the same call (sized from the demand it saw), before a request needs it. Takes and give-backs of one
// store group leave in one call, with at most four calls in flight per group: the requests that arrive
// meanwhile go in the next one. A refusal from the store is remembered until its Retry-After, as a deny note
// is, but for one lease interval at most (others' unused units come back then).
// Here: the local decision, the interval ends and the per-group batching; beside it key-table.ts (the keys),
// lease-call.ts (a key's entry in a call and its answer), lease-arithmetic.ts (the arithmetic, pure) and
// sweep.ts (the timer that reaches leases' interval ends).
import { SETTINGS } from "../core/settings-table.js";
import { systemClock, type Clock } from "../store/clock.js";
import type { Check, CheckResult, LeaseEntry, LeaseReply, Store } from "../store/store.js";
import { carryBack, KeyTable, type KeyState, type LeaseRequest, queuedTake, type Take } from "./key-table.js";
import { installAnswer, takeEntry } from "./lease-call.js";
import {
  admits,
  allowedFigures,
  atIntervalEnd,
  demandPerInterval,
  type Lease,
  rememberedRefusal,
  renewAtMs,
  unitsAtEnd,
  unused,
  worthGivingBack,
} from "./lease-arithmetic.js";
import { Sweep } from "./sweep.js";

export type { LeaseRequest } from "./key-table.js";

/** Keys held (leases, refusals, sizing), unless configured (SLUICE_APPROXIMATE_MAX_KEYS). */
const DEFAULT_APPROXIMATE_MAX_KEYS = SETTINGS.APPROXIMATE_MAX_KEYS.default;
/** Keys per lease call at most (a longer script holds Redis longer); the rest go in the next call. */
const MAX_BATCH_KEYS = 500;
/** Lease calls out at once per store group: requests that arrive meanwhile gather for the next. */
const MAX_IN_FLIGHT = 4;
/** Times a request asks again when the units taken for it went to others first. */
const MAX_ROUNDS = 3;

export type LeaseCallObserver = (ok: boolean, keys: number, seconds: number) => void;

interface GiveBack {
  state: KeyState;
  units: number;
  chargedEndMs: number;
}

interface GroupCalls {
  takes: Take[];
  backs: GiveBack[];
  inFlight: number;
  scheduled: boolean;
}

/** What decide() reserved for a request, to give back to the leases when another limit refuses it. */
export interface LeaseTicket {
  reserved: { state: KeyState; lease: Lease; hits: number }[];
}

/** One limit's answer: its result, or undefined when its store call failed (the failure policy answers). */
export type LeaseAnswer = CheckResult | undefined;

export class Leases {
  private readonly clock: Clock;
  private readonly states: KeyTable;
  private readonly groups = new Map<number, GroupCalls>();
  /** Leases by their interval ends: one the sweep reaches is kept, renewed or ended, unless replaced or ended already. */
  private readonly ending: Sweep<{ state: KeyState; lease: Lease; atEnd: boolean }>;
  /** Closing: leases end without renewal. */
  private closing = false;
  private closed = false;
  private readonly onCall: LeaseCallObserver | undefined;
  /** Metrics: limits answered here without waiting for the store, leases taken, refusals learnt, units given back. */
  decisions = 0;
  leasesTaken = 0;
  refusals = 0;
  unitsReturned = 0;

  constructor(
    private readonly store: Store & Required<Pick<Store, "lease">>,
    opts: { clock?: Clock; maxKeys?: number; onCall?: LeaseCallObserver } = {},
  ) {
    this.clock = opts.clock ?? systemClock;
    this.onCall = opts.onCall;
    this.states = new KeyTable(Math.max(1, opts.maxKeys ?? DEFAULT_APPROXIMATE_MAX_KEYS), (s) => {
      if (s.lease && !s.lease.ended) this.end(s, this.nowMs());
    });
    this.ending = new Sweep(
      () => this.nowMs(),
      (e, nowMs) => {
        if (e.state.lease === e.lease && !e.lease.ended) this.intervalEnd(e.state, e.lease, nowMs, e.atEnd);
      },
    );
  }

  /** Units held in live leases and not used (metrics). */
  get leasedUnits(): number {
    const nowUs = this.clock.nowMicros();
    let n = 0;
    for (const s of this.states.values()) n += unused(s.lease, nowUs);
    return Math.floor(n);
  }

  /**
   * Decides a request's approximate limits, all or nothing: from the leases where they hold enough, else
   * after taking leases from the store. dryRun: the request is refused already; report, take nothing.
   * Undefined when the key table is full of keys with calls in flight: the caller decides them exactly.
   */
  decide(
    list: readonly LeaseRequest[],
    dryRun: boolean,
  ): { answers: LeaseAnswer[]; ticket: LeaseTicket } | Promise<{ answers: LeaseAnswer[]; ticket: LeaseTicket }> | undefined {
    const states: KeyState[] = new Array(list.length);
    for (let i = 0; i < list.length; i++) {
      const s = this.states.get(list[i]);
      if (!s) return undefined;
      states[i] = s;
    }
    const ticket: LeaseTicket = { reserved: [] };
    const answers: LeaseAnswer[] = new Array(list.length);
    let lacking: number[] | undefined;
    const nowMs = this.nowMs();
    const nowUs = this.clock.nowMicros();
    for (let i = 0; i < list.length; i++) {
      const r = this.local(states[i], list[i].check, nowMs, nowUs, dryRun, ticket);
      if (r === undefined) (lacking ??= []).push(i);
      else answers[i] = r;
    }
    if (!lacking || dryRun || refuses(list, answers)) {
      this.decisions += list.length;
      if (lacking) for (const i of lacking) answers[i] = this.figures(states[i], nowMs, nowUs);
      if (!dryRun && refuses(list, answers)) this.giveBack(ticket);
      return { answers, ticket };
    }
    this.decisions += list.length - lacking.length;
    return this.viaStore(list, states, lacking, answers, ticket);
  }

  /** Gives a refused request's units back to the leases they came from (nothing is consumed). */
  giveBack(ticket: LeaseTicket): void {
    const nowMs = this.nowMs();
    for (const r of ticket.reserved) {
      if (!r.lease.ended) {
        r.lease.used -= r.hits;
      } else if (worthGivingBack(r.lease, nowMs)) {
        // The lease ended meanwhile (its unused units went back already): these go back on their own.
        this.queueBack(r.state, r.hits, r.lease.chargedEndMs);
      }
    }
    ticket.reserved.length = 0;
  }

  /** Ends every lease and gives the unused units back, waiting at most timeoutMs (shutdown). */
  async close(timeoutMs = 0): Promise<number> {
    this.closing = true;
    const deadline = this.nowMs() + timeoutMs;
    // Leases that calls in flight install meanwhile end too, in the next turn.
    for (;;) {
      const nowMs = this.nowMs();
      for (const s of this.states.values()) if (s.lease && !s.lease.ended) this.end(s, nowMs);
      if (nowMs >= deadline || this.backlog() === 0) break;
      for (const g of this.groups.keys()) this.schedule(g);
      await new Promise((r) => setTimeout(r, 10));
    }
    this.closed = true;
    this.ending.stop();
    let left = 0;
    for (const c of this.groups.values()) for (const b of c.backs) left += b.units;
    return left;
  }

  /** Entries waiting to be sent, or in flight. */
  private backlog(): number {
    let n = 0;
    for (const c of this.groups.values()) n += c.takes.length + c.backs.length + c.inFlight;
    return n;
  }

  private nowMs(): number {
    return Math.floor(this.clock.nowMicros() / 1000);
  }

  /**
   * The limit answered from this instance alone: from its lease (reserving the hits), from a remembered
   * refusal, or refused for a cost over the capacity. Undefined: the store must be asked.
   */
  private local(s: KeyState, c: Check, nowMs: number, nowUs: number, dryRun: boolean, ticket: LeaseTicket): CheckResult | undefined {
    const need = Math.max(c.hits, 1);
    if (c.hits > c.capacity) return { ...this.figures(s, nowMs, nowUs), allowed: false, retryAfterMs: -1 };
    const lease = s.lease;
    if (lease && admits(lease, need, nowMs, nowUs)) {
      if (!dryRun && c.hits > 0) {
        lease.used += c.hits;
        ticket.reserved.push({ state: s, lease, hits: c.hits });
      }
      return this.figures(s, nowMs, nowUs);
    }
    if (s.refusedNeed > 0 && need >= s.refusedNeed && nowMs < s.refusedUntilMs) return rememberedRefusal(s, s.retryAtMs, nowMs);
    return undefined;
  }

  /** Figures of an allowed answer: what the store had left at its last answer plus this lease's unused units. */
  private figures(s: KeyState, nowMs: number, nowUs: number): CheckResult {
    return allowedFigures(s, unused(s.lease, nowUs), s.check.capacity, nowMs);
  }

  private async viaStore(
    list: readonly LeaseRequest[],
    states: KeyState[],
    lacking: number[],
    answers: LeaseAnswer[],
    ticket: LeaseTicket,
  ): Promise<{ answers: LeaseAnswer[]; ticket: LeaseTicket }> {
    let todo = lacking;
    for (let round = 0; todo.length > 0; round++) {
      const oks = await Promise.all(todo.map((i) => this.ask(states[i], list[i].check)));
      const nowMs = this.nowMs();
      const nowUs = this.clock.nowMicros();
      const next: number[] = [];
      for (let j = 0; j < todo.length; j++) {
        const i = todo[j];
        if (!oks[j]) {
          answers[i] = undefined; // the store failed: the limit's failure policy answers
          continue;
        }
        const r = this.local(states[i], list[i].check, nowMs, nowUs, false, ticket);
        if (r) answers[i] = r;
        else if (round + 1 < MAX_ROUNDS) next.push(i);
        // Taken by others first, round after round: refused as the store's last answer left it.
        else answers[i] = { ...this.figures(states[i], nowMs, nowUs), allowed: false, remaining: 0, retryAfterMs: 1 };
      }
      todo = next;
    }
    if (refuses(list, answers)) this.giveBack(ticket);
    return { answers, ticket };
  }

  /** Waits for the take in flight for the key, else joins (or starts) the next one; false when the store failed. */
  private ask(s: KeyState, c: Check): Promise<boolean> {
    if (s.inFlight) return s.inFlight.done;
    // A lease past its end that the sweep has not reached (a busy event loop): its renewal is this take.
    const l = s.lease;
    if (l && !l.ended) {
      const nowMs = this.nowMs();
      if (nowMs >= l.endsAtMs) this.intervalEnd(s, l, nowMs, true);
    }
    let t = s.queued;
    if (!t) {
      t = queuedTake(s, Infinity, undefined);
      this.calls(s.group).takes.push(t);
      this.schedule(s.group);
    }
    t.demand += c.hits;
    t.need = Math.min(t.need, Math.max(c.hits, 1));
    return t.done;
  }

  private calls(g: number): GroupCalls {
    let c = this.groups.get(g);
    if (!c) this.groups.set(g, (c = { takes: [], backs: [], inFlight: 0, scheduled: false }));
    return c;
  }

  /** A call for the group once this turn of the event loop is over (its requests join), unless enough are out. */
  private schedule(g: number): void {
    const c = this.calls(g);
    if (c.inFlight >= MAX_IN_FLIGHT || c.scheduled || this.closed) return;
    c.scheduled = true;
    setImmediate(() => {
      c.scheduled = false;
      void this.send(g);
    });
  }

  private async send(g: number): Promise<void> {
    const c = this.calls(g);
    if (c.inFlight >= MAX_IN_FLIGHT || (c.takes.length === 0 && c.backs.length === 0)) return;
    const takes = c.takes.splice(0, MAX_BATCH_KEYS);
    const backs = c.backs.splice(0, MAX_BATCH_KEYS);
    const entries: LeaseEntry[] = [];
    const nowMs = this.nowMs();
    const nowUs = this.clock.nowMicros();
    for (const t of takes) {
      const s = t.state;
      s.queued = undefined;
      s.inFlight = t;
      entries.push(takeEntry(t, nowMs, nowUs));
    }
    for (const b of backs) entries.push({ check: b.state.check, want: 0, need: 1, back: b.units, backEndMs: b.chargedEndMs });
    c.inFlight++;
    const sentUs = this.clock.nowMicros();
    let reply: LeaseReply | undefined;
    try {
      reply = await this.store.lease(g, entries);
    } catch {
      // Takes fail (the failure policy answers); unused units given back are lost until their window ends.
    }
    c.inFlight--;
    this.onCall?.(reply !== undefined, entries.length, (this.clock.nowMicros() - sentUs) / 1e6);
    if (reply) {
      for (const b of backs) this.unitsReturned += b.units;
      for (const t of takes) this.unitsReturned += t.back;
    }
    for (let j = 0; j < takes.length; j++) {
      const t = takes[j];
      let ok = reply !== undefined;
      try {
        if (reply) this.install(t, entries[j], reply.results[j], reply.nowUs, sentUs);
      } catch {
        ok = false; // never leave a request waiting: its limit answers by the failure policy
      }
      t.state.inFlight = undefined;
      t.resolve(ok);
    }
    if (c.takes.length > 0 || c.backs.length > 0) this.schedule(g);
  }

  private install(t: Take, e: LeaseEntry, r: LeaseReply["results"][number], storeNowUs: number, sentUs: number): void {
    const s = t.state;
    const { lease, refused } = installAnswer(t, e, r, storeNowUs, sentUs, this.clock.nowMicros());
    if (refused) this.refusals++;
    if (!lease) return;
    this.leasesTaken++;
    if (s.lease && !s.lease.ended) this.end(s, this.nowMs());
    s.lease = lease;
    const renewAt = renewAtMs(lease, s.intervalMs);
    if (lease.midMs < renewAt) this.ending.add(lease.midMs, { state: s, lease, atEnd: false });
    this.ending.add(renewAt, { state: s, lease, atEnd: true });
  }

  /**
   * A live lease at one of its interval ends: kept when used in its first of two; renewed at its end when
   * used in its last interval (its unused units go back in the call that takes the next, which requests
   * arriving meanwhile wait for); else ended.
   */
  private intervalEnd(s: KeyState, l: Lease, nowMs: number, atEnd: boolean): void {
    // A sweep late past the lease's end reaches its first interval's end with it: the end decides.
    const step = atIntervalEnd(l, atEnd || nowMs >= renewAtMs(l, s.intervalMs));
    if (step === "keep") {
      l.usedAtMid = l.used;
      return;
    }
    // A take in flight installs its own lease; one queued (a request found this lease short) carries the give-back.
    if (step === "end" || this.closing || s.inFlight) {
      this.end(s, nowMs);
      return;
    }
    l.ended = true;
    let t = s.queued;
    if (!t) {
      t = queuedTake(s, 1, demandPerInterval(l, nowMs, s.intervalMs));
      this.calls(s.group).takes.push(t);
      this.schedule(s.group);
    }
    carryBack(t, unitsAtEnd(l, nowMs, this.clock.nowMicros()), l.chargedEndMs);
  }

  /** Ends a lease: its unused units go back to the store, unless its window is over. */
  private end(s: KeyState, nowMs: number): void {
    const l = s.lease!;
    l.ended = true;
    const units = unitsAtEnd(l, nowMs, this.clock.nowMicros());
    if (units > 0) this.queueBack(s, units, l.chargedEndMs);
  }

  private queueBack(s: KeyState, units: number, chargedEndMs: number): void {
    this.calls(s.group).backs.push({ state: s, units, chargedEndMs });
    this.schedule(s.group);
  }
}

/** A non-shadow limit refused. */
function refuses(list: readonly LeaseRequest[], answers: readonly LeaseAnswer[]): boolean {
  for (let i = 0; i < list.length; i++) {
    const a = answers[i];
    if (a && !a.allowed && !list[i].check.shadow) return true;
  }
  return false;
}
