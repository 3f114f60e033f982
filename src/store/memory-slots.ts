// The memory store's entries, packed: a counter is a slot in typed arrays (its expiry and up to three numbers)
// rather than a Stored object holding a value object and boxed numbers. The counters' stored forms are a
// number, a token bucket {tokens, lastUs} or a sliding window {index, cur, prev}; any other value is kept as is.
// A slot also holds its key and its place in the recency order (a list through the slots), so that a read
// moves no map entry: the store's map only finds a key's slot.
import type { Stored } from "../counters/check.js";

const NUMBER = 0;
const BUCKET = 1;
const SLIDING = 2;
const OTHER = 3;

/** Numbers per slot: the expiry, then the value's fields. */
const STRIDE = 4;
const FIRST_CAPACITY = 1024;

const NONE = -1;

export class Slots {
  private nums = new Float64Array(FIRST_CAPACITY * STRIDE);
  private kinds = new Uint8Array(FIRST_CAPACITY);
  /** Recency order, least recently used first: each slot's neighbours (NONE at the ends). */
  private before = new Int32Array(FIRST_CAPACITY);
  private after = new Int32Array(FIRST_CAPACITY);
  private oldestSlot = NONE;
  private newestSlot = NONE;
  /** Each slot's key; undefined: a free slot. */
  private readonly keys: (string | undefined)[] = [];
  /** Values of another shape, by slot (rare: no counter saves one today). */
  private readonly others = new Map<number, unknown>();
  private readonly free: number[] = [];
  private used = 0;

  /** A new slot holding `s` under `key`, the most recently used. */
  add(key: string, s: Stored): number {
    const slot = this.free.pop() ?? this.grow();
    this.keys[slot] = key;
    this.write(slot, s);
    this.link(slot);
    return slot;
  }

  /** The slot is the most recently used now. */
  touch(slot: number): void {
    if (slot === this.newestSlot) return;
    this.unlink(slot);
    this.link(slot);
  }

  /** The least recently used slot, or NONE (-1) when none is held. */
  oldest(): number {
    return this.oldestSlot;
  }

  keyOf(slot: number): string | undefined {
    return this.keys[slot];
  }

  /** Slots ever used: indices 0 .. size - 1, some of them free (keyOf undefined). */
  size(): number {
    return this.used;
  }

  write(slot: number, s: Stored): void {
    const n = this.nums;
    const at = slot * STRIDE;
    n[at] = s.expiresAtMs;
    const v = s.value as Record<string, unknown>;
    this.others.delete(slot);
    if (typeof v === "number") {
      this.kinds[slot] = NUMBER;
      n[at + 1] = v;
    } else if (isBucket(v)) {
      this.kinds[slot] = BUCKET;
      n[at + 1] = v.tokens;
      n[at + 2] = v.lastUs;
    } else if (isSliding(v)) {
      this.kinds[slot] = SLIDING;
      n[at + 1] = v.index;
      n[at + 2] = v.cur;
      n[at + 3] = v.prev;
    } else {
      this.kinds[slot] = OTHER;
      this.others.set(slot, v);
    }
  }

  expiresAtMs(slot: number): number {
    return this.nums[slot * STRIDE];
  }

  /** A fresh Stored for the engine (short-lived: it dies young). */
  read(slot: number): Stored {
    const n = this.nums;
    const at = slot * STRIDE;
    const expiresAtMs = n[at];
    switch (this.kinds[slot]) {
      case NUMBER:
        return { value: n[at + 1], expiresAtMs };
      case BUCKET:
        return { value: { tokens: n[at + 1], lastUs: n[at + 2] }, expiresAtMs };
      case SLIDING:
        return { value: { index: n[at + 1], cur: n[at + 2], prev: n[at + 3] }, expiresAtMs };
      default:
        return { value: this.others.get(slot), expiresAtMs };
    }
  }

  release(slot: number): void {
    this.unlink(slot);
    this.keys[slot] = undefined;
    this.others.delete(slot);
    this.free.push(slot);
  }

  clear(): void {
    this.others.clear();
    this.free.length = 0;
    this.keys.length = 0;
    this.used = 0;
    this.oldestSlot = this.newestSlot = NONE;
    this.nums = new Float64Array(FIRST_CAPACITY * STRIDE);
    this.kinds = new Uint8Array(FIRST_CAPACITY);
    this.before = new Int32Array(FIRST_CAPACITY);
    this.after = new Int32Array(FIRST_CAPACITY);
  }

  /** Appends the slot as the most recently used. */
  private link(slot: number): void {
    this.before[slot] = this.newestSlot;
    this.after[slot] = NONE;
    if (this.newestSlot === NONE) this.oldestSlot = slot;
    else this.after[this.newestSlot] = slot;
    this.newestSlot = slot;
  }

  private unlink(slot: number): void {
    const b = this.before[slot];
    const a = this.after[slot];
    if (b === NONE) this.oldestSlot = a;
    else this.after[b] = a;
    if (a === NONE) this.newestSlot = b;
    else this.before[a] = b;
  }

  /** The next never-used slot, doubling the arrays when full (the store's key bound bounds them). */
  private grow(): number {
    if (this.used === this.kinds.length) {
      this.nums = doubled(this.nums);
      this.kinds = doubled(this.kinds);
      this.before = doubled(this.before);
      this.after = doubled(this.after);
    }
    return this.used++;
  }
}

function doubled<T extends Float64Array | Int32Array | Uint8Array>(a: T): T {
  const b = new (a.constructor as new (n: number) => T)(a.length * 2);
  b.set(a);
  return b;
}

/** Exactly a token bucket's fields: anything more would be lost when packed. */
function isBucket(v: Record<string, unknown>): v is { tokens: number; lastUs: number } {
  return typeof v === "object" && v !== null && typeof v.tokens === "number" && typeof v.lastUs === "number" && Object.keys(v).length === 2;
}

function isSliding(v: Record<string, unknown>): v is { index: number; cur: number; prev: number } {
  return (
    typeof v === "object" && v !== null && typeof v.index === "number" && typeof v.cur === "number" && typeof v.prev === "number" && Object.keys(v).length === 3
  );
}
