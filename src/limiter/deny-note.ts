// The in-memory deny note: "this key is refused until ..." so a hot refused key costs no store call
// until its Retry-After has passed. When a note expires, one request (the probe) asks the store and
// the others for that key wait for its answer instead of all asking at once (bench hot-refused, 64
// calls in flight: ~20 store calls per Retry-After period before). Bounded: least recently used
// notes go first.

export interface Note {
  /** Local clock, ms since the epoch. */
  untilMs: number;
  remaining: number;
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

  constructor(private readonly maxEntries: number) {}

  get size(): number {
    return this.notes.size;
  }

  /** The note of a key, live or expired (an expired note stays while it is probed); touches a live one. */
  get(key: string, nowMs: number): Note | undefined {
    const note = this.notes.get(key);
    if (note && note.untilMs > nowMs) {
      this.notes.delete(key);
      this.notes.set(key, note); // touch
    }
    return note;
  }

  /** This request asks the store for a key whose note expired and nobody asks yet: it is the probe. */
  startProbe(key: string, nowMs: number): Probe | undefined {
    const note = this.notes.get(key);
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

  set(key: string, note: Note): void {
    this.notes.delete(key);
    this.notes.set(key, note);
    if (this.notes.size > this.maxEntries) this.notes.delete(this.notes.keys().next().value as string);
  }

  clear(): void {
    this.notes.clear();
  }
}
