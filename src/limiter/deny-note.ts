// The in-memory deny note: "the store refused this limit for a single hit; it will refuse every request
// on it until ..." so a hot refused key costs no store call until its Retry-After has passed. A note only
// repeats what the store said: it speaks for one limit (key + algorithm, capacity, rate or window), under
// the rules generation it was learnt in, and lives at most maxLifeMs (so a quota refusal can't lock a key
// for weeks, and a note outlives data loss on the store by at most that long). When a note expires one
// request (the probe) asks the store and the others for that key wait for its answer instead of all
// asking at once. Bounded: least recently used notes go first.
import { SETTINGS } from "../core/settings-table.js";

/** SLUICE_DENY_NOTE_MAX_MS's default: the longest a note refuses before the store is asked again. */
export const DEFAULT_DENY_NOTE_MAX_MS = SETTINGS.DENY_NOTE_MAX_MS.default;
/** Notes held at most, unless configured (SLUICE_DENY_NOTE_MAX); the oldest goes first. */
export const DEFAULT_DENY_NOTE_MAX_ENTRIES = SETTINGS.DENY_NOTE_MAX.default;

/** What a note is about: the limit as the store saw it. */
interface NoteIdentity {
  algorithm: string;
  capacity: number;
  /** Window seconds (fixed window), refill per second (token bucket), 0 (quota). */
  param: number;
}

interface Note extends NoteIdentity {
  /** Rules generation the note was learnt under: a note from older rules is not used. */
  generation: number;
  /** Local clock, ms since the epoch: the note refuses until then (the store's Retry-After, capped by the note's maximum life). */
  untilMs: number;
  /** When the store said the limit lets a single hit through again (Retry-After), local clock ms. */
  retryAtMs: number;
  /** When the limit is full again (duration_until_reset), local clock ms. */
  resetAtMs: number;
  /** Window or period end the refusal was about (quota bodies), 0 for a token bucket. */
  periodEndMs: number;
  /** Set once the note expired and a request went to the store for its key. */
  probe?: Probe;
}

/** A store call in flight for a key whose note expired; `done` settles once its answer was noted. */
export class Probe {
  readonly done: Promise<void>;
  private finish!: () => void;
  constructor() {
    this.done = new Promise<void>((resolve) => (this.finish = resolve));
  }
  end(): void {
    this.finish();
  }
}

export class DenyNotes {
  /** Insertion order = least recently used first. */
  private readonly notes = new Map<string, Note>();

  constructor(
    private readonly maxEntries: number,
    /** Longest a note refuses before one request asks the store again. */
    readonly maxLifeMs: number,
  ) {}

  get size(): number {
    return this.notes.size;
  }

  /**
   * The note of a key if it speaks for this limit under this generation, live or expired (an expired
   * note stays while it is probed); touches a live one.
   */
  get(key: string, algorithm: string, capacity: number, param: number, generation: number, nowMs: number): Note | undefined {
    const note = this.notes.get(key);
    if (!note || note.generation !== generation || note.algorithm !== algorithm || note.capacity !== capacity || note.param !== param) {
      return undefined;
    }
    if (note.untilMs > nowMs) {
      this.notes.delete(key);
      this.notes.set(key, note); // touch
    }
    return note;
  }

  /** The note of a key as it is, for a caller that matched it with get() in the same turn. */
  peek(key: string): Note | undefined {
    return this.notes.get(key);
  }

  /** This request asks the store for a key whose note expired and nobody asks yet: it is the probe. */
  startProbe(key: string, algorithm: string, capacity: number, param: number, generation: number, nowMs: number): Probe | undefined {
    const note = this.get(key, algorithm, capacity, param, generation, nowMs);
    if (!note || note.untilMs > nowMs || note.probe) return undefined;
    note.probe = new Probe();
    return note.probe;
  }

  /**
   * The probe's answer is in (a refusal was noted already, replacing the expired note). `exhausted`:
   * it was allowed and left nothing, so the next request may well be refused: the expired note stays
   * for one of the waiters to probe again. Otherwise it goes. Waiters go on either way.
   */
  endProbe(key: string, probe: Probe, exhausted: boolean): void {
    const note = this.notes.get(key);
    if (note?.probe === probe) {
      if (exhausted) note.probe = undefined;
      else this.notes.delete(key);
    }
    probe.end();
  }

  /** A refusal of a single hit, learnt from the stored level at nowMs (local clock, taken before the call). */
  set(key: string, note: Note): void {
    // A probe in flight on the note replaced still ends through endProbe (its waiters go on).
    this.notes.delete(key);
    this.notes.set(key, note);
    if (this.notes.size > this.maxEntries) this.notes.delete(this.notes.keys().next().value as string);
  }

  clear(): void {
    this.notes.clear();
  }
}
