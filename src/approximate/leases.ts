// Approximate limits (`approximate: {sync_interval_ms: N}`) as leases: an instance admits locally only
// units it has already taken from the store's counter (lua/lease.lua: the algorithm's own check, Redis
// TIME deciding the window), so nothing is admitted that the store did not count first. A lease lives at
// most N ms (and never past its window's end); its unused units go back to the store when it ends. Takes
// and give-backs of one store group leave in one call, with at most four calls in flight per group: the
// requests that arrive meanwhile go in the next one. A refusal from the store is remembered until its
// Retry-After, as a deny note is, but for one lease interval at most (others' unused units come back then). The same shape can later serve Envoy's rate_limit_quota assignments.
import { SETTINGS } from "../core/settings-table.js";
import { algorithm } from "../counters/registry.js";
import { systemClock, type Clock } from "../store/clock.js";
import type { Check, CheckResult, LeaseEntry, LeaseReply, Store } from "../store/store.js";

/** Keys held (leases, refusals, sizing), unless configured (SLUICE_APPROXIMATE_MAX_KEYS). */
const DEFAULT_APPROXIMATE_MAX_KEYS = SETTINGS.APPROXIMATE_MAX_KEYS.default;
/** A lease's units beyond the requests waiting for it: this share of what the store had left. */
const ROOM_SHARE = 0.1;
/** Keys per lease call at most (a longer script holds Redis longer); the rest go in the next call. */
const MAX_BATCH_KEYS = 500;
/** Lease calls out at once per store group: requests that arrive meanwhile gather for the next. */
const MAX_IN_FLIGHT = 4;
/** A refusal is remembered at most this long (and at most one lease interval). */
const MAX_REFUSAL_MS = 60_000;
/** Times a request asks again when the units taken for it went to others first. */
const MAX_ROUNDS = 3;
/** Ended leases are swept (their unused units queued for the store) in steps of this many ms. */
const SWEEP_MS = 10;

/** One approximate limit of a request: its check (hits = its cost), store group and lease life. */
export interface LeaseRequest {
  check: Check;
  group: number;
  intervalMs: number;
}

export type LeaseCallObserver = (ok: boolean, keys: number, seconds: number) => void;

interface Lease {
  units: number;
  /** Units admitted (or reserved by a request still being decided) from it. */
  used: number;
  /** Local µs when the call that took it was sent. */
  startUs: number;
  /** Local ms: the lease ends here (its interval, or before its window's end by the store's clock). */
  endsAtMs: number;
  /** The window its units were charged in (the store's ms; 0: a bucket), for the give-back. */
  chargedEndMs: number;
  /**
   * It ends with a window that resets whole at its end (a fixed window): its unused units are then worth
   * nothing to give back. A sliding window's still count (as the previous window's) and go back.
   */
  endsWithWindow: boolean;
  /** Token bucket: the refill that fades unused units, per second, once `slack` units of refill passed. */
  rate: number;
  slack: number;
  /**
   * Units taken for the requests waiting when it was taken: theirs at once (as an exact limit's hits are at
   * the store's time), so they do not fade; used first.
   */
  firm: number;
  ended: boolean;
}

interface KeyState {
  check: Check;
  group: number;
  intervalMs: number;
  lease: Lease | undefined;
  /** The store's figures at its last answer: what it had left, when it resets (local ms), its window end. */
  storeRemaining: number;
  resetAtMs: number;
  periodEndMs: number;
  answered: boolean;
  /** A refusal from the store: requests needing at least refusedNeed are refused until refusedUntilMs. */
  refusedNeed: number;
  refusedUntilMs: number;
  retryAtMs: number;
  /** The take being gathered for the next call, and the one in flight. */
  queued: Take | undefined;
  inFlight: Take | undefined;
}

interface Take {
  state: KeyState;
  demand: number;
  need: number;
  done: Promise<boolean>;
  resolve: (ok: boolean) => void;
}

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
  private readonly maxKeys: number;
  /** Insertion order = least recently used first. */
  private readonly states = new Map<string, KeyState>();
  private readonly groups = new Map<number, GroupCalls>();
  /** Leases by the sweep step they end in. */
  private readonly ending = new Map<number, { state: KeyState; lease: Lease }[]>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweepAtMs = Infinity;
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
    this.maxKeys = Math.max(1, opts.maxKeys ?? DEFAULT_APPROXIMATE_MAX_KEYS);
    this.onCall = opts.onCall;
  }

  /** Units held in live leases and not used (metrics). */
  get leasedUnits(): number {
    const nowMs = this.nowMs();
    let n = 0;
    for (const s of this.states.values()) if (s.lease && !s.lease.ended) n += Math.max(0, available(s.lease, nowMs, this.clock.nowMicros()));
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
      const s = this.state(list[i]);
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
      if (lacking) for (const i of lacking) answers[i] = this.figures(states[i], nowMs, nowUs, 0);
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
      } else if (!(r.lease.endsWithWindow && nowMs >= r.lease.endsAtMs)) {
        // The lease ended meanwhile (its unused units went back already): these go back on their own.
        this.queueBack(r.state, r.hits, r.lease.chargedEndMs);
      }
    }
    ticket.reserved.length = 0;
  }

  /** Ends every lease and gives the unused units back, waiting at most timeoutMs (shutdown). */
  async close(timeoutMs = 0): Promise<number> {
    const nowMs = this.nowMs();
    for (const s of this.states.values()) if (s.lease && !s.lease.ended) this.end(s, nowMs);
    const deadline = nowMs + timeoutMs;
    while (this.nowMs() < deadline && this.backlog() > 0) {
      for (const g of this.groups.keys()) this.schedule(g);
      await new Promise((r) => setTimeout(r, 10));
    }
    this.closed = true;
    if (this.sweepTimer) clearTimeout(this.sweepTimer);
    this.sweepTimer = undefined;
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

  private state(req: LeaseRequest): KeyState | undefined {
    const key = req.check.key;
    let s = this.states.get(key);
    if (s) {
      this.states.delete(key);
    } else {
      if (this.states.size >= this.maxKeys && !this.evictOne()) return undefined;
      s = {
        check: req.check,
        group: req.group,
        intervalMs: req.intervalMs,
        lease: undefined,
        storeRemaining: req.check.capacity,
        resetAtMs: 0,
        periodEndMs: 0,
        answered: false,
        refusedNeed: 0,
        refusedUntilMs: 0,
        retryAtMs: 0,
        queued: undefined,
        inFlight: undefined,
      };
    }
    s.check = req.check;
    s.intervalMs = req.intervalMs;
    this.states.set(key, s);
    return s;
  }

  /** Drops the least recently used key without a call in flight; its lease ends (units go back). */
  private evictOne(): boolean {
    let scanned = 0;
    for (const [key, s] of this.states) {
      if (++scanned > 16) return false;
      if (s.queued || s.inFlight) continue;
      if (s.lease && !s.lease.ended) this.end(s, this.nowMs());
      this.states.delete(key);
      return true;
    }
    return false;
  }

  /**
   * The limit answered from this instance alone: from its lease (reserving the hits), from a remembered
   * refusal, or refused for a cost over the capacity. Undefined: the store must be asked.
   */
  private local(s: KeyState, c: Check, nowMs: number, nowUs: number, dryRun: boolean, ticket: LeaseTicket): CheckResult | undefined {
    const need = Math.max(c.hits, 1);
    if (c.hits > c.capacity) return { ...this.figures(s, nowMs, nowUs, 0), allowed: false, retryAfterMs: -1 };
    const lease = s.lease;
    if (lease && !lease.ended && nowMs < lease.endsAtMs && available(lease, nowMs, nowUs) >= need) {
      if (!dryRun && c.hits > 0) {
        lease.used += c.hits;
        ticket.reserved.push({ state: s, lease, hits: c.hits });
      }
      return this.figures(s, nowMs, nowUs, 0);
    }
    if (s.refusedNeed > 0 && need >= s.refusedNeed && nowMs < s.refusedUntilMs) {
      return {
        allowed: false,
        remaining: 0,
        resetSeconds: Math.max(Math.ceil((s.resetAtMs - nowMs) / 1000), 1),
        retryAfterMs: Math.max(s.retryAtMs - nowMs, 1),
        periodEndMs: s.periodEndMs,
      };
    }
    return undefined;
  }

  /** Figures of an allowed answer: what the store had left at its last answer plus this lease's unused units. */
  private figures(s: KeyState, nowMs: number, nowUs: number, extra: number): CheckResult {
    const own = s.lease && !s.lease.ended ? Math.max(0, available(s.lease, nowMs, nowUs)) : 0;
    return {
      allowed: true,
      remaining: Math.min(Math.floor(s.storeRemaining + own + extra), s.check.capacity),
      resetSeconds: s.answered ? Math.max(Math.ceil((s.resetAtMs - nowMs) / 1000), 0) : 0,
      retryAfterMs: -1,
      periodEndMs: s.periodEndMs,
    };
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
        else answers[i] = { ...this.figures(states[i], nowMs, nowUs, 0), allowed: false, remaining: 0, retryAfterMs: 1 };
      }
      todo = next;
    }
    if (refuses(list, answers)) this.giveBack(ticket);
    return { answers, ticket };
  }

  /** Waits for the take in flight for the key, else joins (or starts) the next one; false when the store failed. */
  private ask(s: KeyState, c: Check): Promise<boolean> {
    if (s.inFlight) return s.inFlight.done;
    let t = s.queued;
    if (!t) {
      let resolve!: (ok: boolean) => void;
      const done = new Promise<boolean>((r) => (resolve = r));
      t = s.queued = { state: s, demand: 0, need: Infinity, done, resolve };
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
    for (const t of takes) {
      const s = t.state;
      s.queued = undefined;
      s.inFlight = t;
      entries.push({ check: s.check, want: this.want(s, t), need: t.need, back: 0, backEndMs: 0 });
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
    if (reply) for (let j = 0; j < backs.length; j++) this.unitsReturned += backs[j].units;
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

  /**
   * Units to take: what the requests waiting need, plus a share of the room the store had left at its last
   * answer (the capacity before any): large while the limit has room, down to the waiting requests near it.
   */
  private want(s: KeyState, t: Take): number {
    const prev = s.lease;
    const room = s.storeRemaining + (prev && !prev.ended ? Math.max(0, prev.units - prev.used) : 0);
    return Math.min(Math.max(t.demand, t.need) + Math.floor(ROOM_SHARE * room), s.check.capacity);
  }

  private install(t: Take, e: LeaseEntry, r: LeaseReply["results"][number], storeNowUs: number, sentUs: number): void {
    const s = t.state;
    const sentMs = Math.floor(sentUs / 1000);
    const nowMs = this.nowMs();
    const p = r.probe;
    s.answered = true;
    // The probe reports what `need` more would leave when they fit: the store had that much more.
    s.storeRemaining = p.allowed ? p.remaining + e.need : p.remaining;
    s.resetAtMs = sentMs + p.resetSeconds * 1000;
    s.periodEndMs = p.periodEndMs;
    if (r.taken > 0) {
      this.leasesTaken++;
      if (s.lease && !s.lease.ended) this.end(s, nowMs);
      const a = algorithm(s.check.algorithm);
      let endsAtMs = sentMs + s.intervalMs;
      let endsWithWindow = false;
      // A window's units count in that window only: the lease ends before it does by the store's clock
      // (measured from the send, so never later than the store's own end).
      if (p.periodEndMs > 0) {
        const windowEndMs = sentMs + (p.periodEndMs - Math.floor(storeNowUs / 1000));
        if (windowEndMs <= endsAtMs) {
          endsAtMs = windowEndMs;
          endsWithWindow = a.resetsAtEnd;
        }
      }
      const rate = a.refillPerSecond?.(s.check) ?? 0;
      // The bucket held less than storeRemaining + 1 + taken before: refill beyond the rest up to full is
      // refill a bucket without this lease would have lost, so the lease's unused tokens fade from then on.
      const slack = Math.max(0, s.check.capacity - (s.storeRemaining + 1 + r.taken));
      const firm = Math.min(r.taken, Math.max(t.demand, t.need));
      s.lease = { units: r.taken, used: 0, startUs: sentUs, endsAtMs, chargedEndMs: p.periodEndMs, endsWithWindow, rate, slack, firm, ended: false };
      this.addEnding(s, s.lease);
    }
    if (p.allowed) {
      s.refusedNeed = 0;
    } else if (p.retryAfterMs > 0) {
      // Refused (or took what was left): the store refuses more until its Retry-After. Remembered for one
      // lease interval at most: units other instances give back when their leases end are found then.
      if (r.taken < e.need) this.refusals++;
      s.refusedNeed = e.need;
      s.refusedUntilMs = sentMs + Math.min(p.retryAfterMs, s.intervalMs, MAX_REFUSAL_MS);
      s.retryAtMs = sentMs + p.retryAfterMs;
    }
  }

  /** Ends a lease: its unused units go back to the store, unless its window is over. */
  private end(s: KeyState, nowMs: number): void {
    const l = s.lease!;
    l.ended = true;
    const unused = available(l, nowMs, this.clock.nowMicros());
    if (unused > 0 && !(l.endsWithWindow && nowMs >= l.endsAtMs)) this.queueBack(s, unused, l.chargedEndMs);
  }

  private queueBack(s: KeyState, units: number, chargedEndMs: number): void {
    this.calls(s.group).backs.push({ state: s, units, chargedEndMs });
    this.schedule(s.group);
  }

  private addEnding(state: KeyState, lease: Lease): void {
    const step = Math.ceil(lease.endsAtMs / SWEEP_MS);
    const list = this.ending.get(step);
    if (list) list.push({ state, lease });
    else this.ending.set(step, [{ state, lease }]);
    const at = step * SWEEP_MS;
    if (at < this.sweepAtMs && !this.closed) {
      if (this.sweepTimer) clearTimeout(this.sweepTimer);
      this.sweepAtMs = at;
      this.sweepTimer = setTimeout(() => this.sweep(), Math.max(0, at - this.nowMs()));
      this.sweepTimer.unref();
    }
  }

  /** Ends the leases due (their unused units go back) and waits for the next step with any. */
  private sweep(): void {
    this.sweepTimer = undefined;
    this.sweepAtMs = Infinity;
    const nowMs = this.nowMs();
    const nowStep = Math.floor(nowMs / SWEEP_MS);
    let next = Infinity;
    for (const [step, list] of this.ending) {
      if (step > nowStep) {
        next = Math.min(next, step);
        continue;
      }
      this.ending.delete(step);
      for (const e of list) if (e.state.lease === e.lease && !e.lease.ended) this.end(e.state, nowMs);
    }
    if (next < Infinity && next * SWEEP_MS < this.sweepAtMs && !this.closed) {
      this.sweepAtMs = next * SWEEP_MS;
      this.sweepTimer = setTimeout(() => this.sweep(), Math.max(0, this.sweepAtMs - nowMs));
      this.sweepTimer.unref();
    }
  }
}

/** Unused units of a lease now; a bucket's units beyond the firm ones fade once the refill they held back would have overflowed. */
function available(l: Lease, _nowMs: number, nowUs: number): number {
  const unused = l.units - l.used;
  if (l.rate <= 0) return unused;
  const firm = Math.max(0, l.firm - l.used);
  const fade = Math.max(0, ((nowUs - l.startUs) / 1e6) * l.rate - l.slack);
  return firm + Math.max(0, unused - firm - fade);
}

/** A non-shadow limit refused. */
function refuses(list: readonly LeaseRequest[], answers: readonly LeaseAnswer[]): boolean {
  for (let i = 0; i < list.length; i++) {
    const a = answers[i];
    if (a && !a.allowed && !list[i].check.shadow) return true;
  }
  return false;
}
