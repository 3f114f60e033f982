// The key table of approximate limits: per key, its lease, the store's figures at its last answer, a
// remembered refusal and its takes. Bounded (SLUICE_APPROXIMATE_MAX_KEYS): least recently used first out,
// but never a key with a call queued or in flight.
import type { Check } from "../store/store.js";
import type { Lease, StoreFigures } from "./lease-arithmetic.js";

/** Keys looked at for one to drop before the table counts as full. */
const EVICT_SCAN = 16;

/** One approximate limit of a request: its check (hits = its cost), store group and lease life. */
export interface LeaseRequest {
  check: Check;
  group: number;
  intervalMs: number;
}

export interface KeyState extends StoreFigures {
  check: Check;
  group: number;
  intervalMs: number;
  lease: Lease | undefined;
  /** A refusal from the store: requests needing at least refusedNeed are refused until refusedUntilMs. */
  refusedNeed: number;
  refusedUntilMs: number;
  retryAtMs: number;
  /** The take being gathered for the next call, and the one in flight. */
  queued: Take | undefined;
  inFlight: Take | undefined;
}

/**
 * Units to take for a key in the next call: what its waiting requests want, and the least one needs; with
 * units of its ended lease to give back in the same call, and, for a lease renewed at its end, the demand that
 * lease saw (units per interval) and the intervals planned for the next.
 */
export interface Take {
  state: KeyState;
  demand: number;
  need: number;
  back: number;
  backEndMs: number;
  renewDemand: number | undefined;
  intervals: number;
  done: Promise<boolean>;
  resolve: (ok: boolean) => void;
}

export class KeyTable {
  /** Insertion order = least recently used first. */
  private readonly states = new Map<string, KeyState>();

  /** onEvict: a key dropped (its live lease must end, its unused units go back). */
  constructor(
    private readonly maxKeys: number,
    private readonly onEvict: (s: KeyState) => void,
  ) {}

  values(): IterableIterator<KeyState> {
    return this.states.values();
  }

  /** The request's key, now the most recently used; undefined when the table is full of keys with calls out. */
  get(req: LeaseRequest): KeyState | undefined {
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

  /** Drops the least recently used key without a call queued or in flight. */
  private evictOne(): boolean {
    let scanned = 0;
    for (const [key, s] of this.states) {
      if (++scanned > EVICT_SCAN) return false;
      if (s.queued || s.inFlight) continue;
      this.onEvict(s);
      this.states.delete(key);
      return true;
    }
    return false;
  }
}

/** A new take for the key, queued (the caller adds it to its group's next call); requests join it until it is sent. */
export function queuedTake(s: KeyState, need: number, renewDemand: number | undefined): Take {
  let resolve!: (ok: boolean) => void;
  const done = new Promise<boolean>((r) => (resolve = r));
  s.queued = { state: s, demand: 0, need, back: 0, backEndMs: 0, renewDemand, intervals: 1, done, resolve };
  return s.queued;
}

/** Units of the key's ended lease go back in the take's call, before it takes. */
export function carryBack(t: Take, units: number, chargedEndMs: number): void {
  if (units <= 0) return;
  t.back += units;
  t.backEndMs = chargedEndMs;
}
