// The in-memory deny note: "this key is refused until ..." so a hot refused key costs no store call
// until its Retry-After has passed. Bounded: least recently used notes go first.

export interface Note {
  /** Local clock, ms since the epoch. */
  untilMs: number;
  remaining: number;
  /** Window or period end the refusal was about (quota bodies), 0 for a token bucket. */
  periodEndMs: number;
}

export class DenyNotes {
  /** Insertion order = least recently used first. */
  private readonly notes = new Map<string, Note>();

  constructor(private readonly maxEntries: number) {}

  get size(): number {
    return this.notes.size;
  }

  get(key: string, nowMs: number): Note | undefined {
    const note = this.notes.get(key);
    if (!note) return undefined;
    this.notes.delete(key);
    if (note.untilMs <= nowMs) return undefined;
    this.notes.set(key, note); // touch
    return note;
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
