// Space-Saving (Metwally et al.) in its stream-summary form: at most `capacity` counters; a new key takes
// over a least counted one and inherits its count (so counts only ever overestimate, by at most that
// inherited count). Counters sit in buckets of equal count, in a list from least to most: an increment
// moves a counter to the next bucket, O(1) work whatever the capacity.

interface Counter {
  key: string;
  bucket: Bucket;
  /** The count inherited at takeover: the key's own count is at least count - error. */
  error: number;
}

interface Bucket {
  count: number;
  items: Set<Counter>;
  prev: Bucket | undefined;
  next: Bucket | undefined;
}

export class SpaceSaving {
  private readonly counters = new Map<string, Counter>();
  /** The bucket of the least count. */
  private head: Bucket | undefined;

  constructor(readonly capacity: number) {
    if (capacity < 1) throw new Error("SpaceSaving needs a capacity of at least 1");
  }

  get size(): number {
    return this.counters.size;
  }

  add(key: string): void {
    let c = this.counters.get(key);
    if (c) return this.moveUp(c);
    if (this.counters.size < this.capacity) {
      const head = this.head;
      let b = head;
      if (b?.count !== 1) {
        b = { count: 1, items: new Set(), prev: undefined, next: head };
        if (head) head.prev = b;
        this.head = b;
      }
      c = { key, bucket: b, error: 0 };
      b.items.add(c);
      this.counters.set(key, c);
      return;
    }
    // Full: the new key takes over a counter of the least count.
    c = this.head!.items.values().next().value!;
    this.counters.delete(c.key);
    c.key = key;
    c.error = c.bucket.count;
    this.counters.set(key, c);
    this.moveUp(c);
  }

  /** [key, count], any order: the count seen (an upper bound), or with `guaranteed` count - error (a lower bound; keys at 0 left out). */
  entries(guaranteed = false): [string, number][] {
    const out: [string, number][] = [];
    for (const c of this.counters.values()) {
      const n = guaranteed ? c.bucket.count - c.error : c.bucket.count;
      if (n > 0) out.push([c.key, n]);
    }
    return out;
  }

  clear(): void {
    this.counters.clear();
    this.head = undefined;
  }

  private moveUp(c: Counter): void {
    const b = c.bucket;
    let next = b.next;
    if (!next || next.count !== b.count + 1) {
      next = { count: b.count + 1, items: new Set(), prev: b, next };
      if (b.next) b.next.prev = next;
      b.next = next;
    }
    b.items.delete(c);
    next.items.add(c);
    c.bucket = next;
    if (b.items.size === 0) {
      if (b.prev) b.prev.next = b.next;
      else this.head = b.next;
      if (b.next) b.next.prev = b.prev;
    }
  }
}
