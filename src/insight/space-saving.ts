// Space-Saving (Metwally et al.) in its stream-summary form: at most `capacity` counters; a new key takes
// over a least counted one and inherits its count (so counts only ever overestimate, by at most that
// inherited count). Counters sit in buckets of equal count, in a list from least to most. An add of one
// moves a counter to the next bucket, O(1) work whatever the capacity; an add of a weight w walks past the
// buckets between (at most `capacity` of them). Adding w at once leaves the summary exactly as w adds of
// one would: the same counter taken over, the same counts and errors, the same order within buckets.

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

  /** Counts `key` `weight` times (a whole number from 1 to Number.MAX_SAFE_INTEGER). */
  add(key: string, weight = 1): void {
    if (!Number.isSafeInteger(weight) || weight < 1) throw new RangeError(`SpaceSaving adds a whole number of at least 1, got ${weight}`);
    let c = this.counters.get(key);
    if (c) return this.moveUp(c, weight);
    if (this.counters.size < this.capacity) {
      // A new counter at 0, then moved up: placed as if it came from below the least count.
      const zero: Bucket = { count: 0, items: new Set(), prev: undefined, next: this.head };
      if (this.head) this.head.prev = zero;
      this.head = zero;
      c = { key, bucket: zero, error: 0 };
      zero.items.add(c);
      this.counters.set(key, c);
      return this.moveUp(c, weight);
    }
    // Full: the new key takes over a counter of the least count.
    c = this.head!.items.values().next().value!;
    this.counters.delete(c.key);
    c.key = key;
    c.error = c.bucket.count;
    this.counters.set(key, c);
    this.moveUp(c, weight);
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

  /** [key, count, error] in the summary's order: least counted first, in their order within a count. */
  dump(): [string, number, number][] {
    const out: [string, number, number][] = [];
    for (let b = this.head; b; b = b.next) for (const c of b.items) out.push([c.key, b.count, c.error]);
    return out;
  }

  clear(): void {
    this.counters.clear();
    this.head = undefined;
  }

  /** Moves c from its bucket to the one of its count + w (made where missing), dropping a bucket left empty. */
  private moveUp(c: Counter, w: number): void {
    const b = c.bucket;
    const target = b.count + w;
    let prev = b;
    let next = b.next;
    while (next && next.count < target) {
      prev = next;
      next = next.next;
    }
    if (!next || next.count !== target) {
      const made: Bucket = { count: target, items: new Set(), prev, next };
      if (next) next.prev = made;
      prev.next = made;
      next = made;
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
