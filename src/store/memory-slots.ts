// The memory store's values, packed: a counter is a slot in typed arrays (its expiry and up to three numbers)
// rather than a Stored object holding a value object and boxed numbers. The counters' stored forms are a
// number, a token bucket {tokens, lastUs} or a sliding window {index, cur, prev}; any other value is kept as is.
import type { Stored } from "../counters/check.js";

const NUMBER = 0;
const BUCKET = 1;
const SLIDING = 2;
const OTHER = 3;

/** Numbers per slot: the expiry, then the value's fields. */
const STRIDE = 4;
const FIRST_CAPACITY = 1024;

export class Slots {
  private nums = new Float64Array(FIRST_CAPACITY * STRIDE);
  private kinds = new Uint8Array(FIRST_CAPACITY);
  /** Values of another shape, by slot (rare: no counter saves one today). */
  private readonly others = new Map<number, unknown>();
  private readonly free: number[] = [];
  private used = 0;

  /** A new slot holding `s`. */
  add(s: Stored): number {
    const slot = this.free.pop() ?? this.grow();
    this.write(slot, s);
    return slot;
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
    this.others.delete(slot);
    this.free.push(slot);
  }

  clear(): void {
    this.others.clear();
    this.free.length = 0;
    this.used = 0;
    this.nums = new Float64Array(FIRST_CAPACITY * STRIDE);
    this.kinds = new Uint8Array(FIRST_CAPACITY);
  }

  /** The next never-used slot, doubling the arrays when full (the store's key bound bounds them). */
  private grow(): number {
    if (this.used === this.kinds.length) {
      const nums = new Float64Array(this.nums.length * 2);
      nums.set(this.nums);
      const kinds = new Uint8Array(this.kinds.length * 2);
      kinds.set(this.kinds);
      this.nums = nums;
      this.kinds = kinds;
    }
    return this.used++;
  }
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
