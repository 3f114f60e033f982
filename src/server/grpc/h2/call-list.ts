// The calls waiting on something, oldest first: an intrusive doubly linked list, so a call joins and
// leaves it in O(1) and a sweep looks only at its head. A call may be in two such lists at once (its
// body not ended; its answer not written): it carries the fields of each list itself (slot 0 and slot
// 1), so joining allocates nothing. The list code is written once, for either slot.

/** Which of an item's two sets of list fields a list uses. */
export type Slot = 0 | 1;

/**
 * What an item carries for each slot: its neighbours, and whether it is in that list. No join time: a
 * number field set to performance.now() would be a boxed double, one allocation per call and slot; the
 * item's own time is read by shiftJoinedBy.
 */
export interface Linked<T> {
  prev0: T | null;
  next0: T | null;
  in0: boolean;
  prev1: T | null;
  next1: T | null;
  in1: boolean;
}

export class CallList<T extends Linked<T>> {
  private head: T | null = null;
  private tail: T | null = null;

  // Each list reads one slot's fields by name (a branch on a constant of the list, not a computed key):
  // every load and store stays monomorphic.
  constructor(private readonly slot: Slot) {}

  /** Joins at the tail: items join in the order of the time shiftJoinedBy reads (performance.now() is monotonic). */
  push(item: T): void {
    if (this.listed(item)) this.remove(item);
    const tail = this.tail;
    this.set(item, tail, null, true);
    if (tail) this.setNext(tail, item);
    else this.head = item;
    this.tail = item;
  }

  remove(item: T): void {
    if (!this.listed(item)) return;
    const prev = this.slot === 0 ? item.prev0 : item.prev1;
    const next = this.slot === 0 ? item.next0 : item.next1;
    if (prev) this.setNext(prev, next);
    else this.head = next;
    if (next) this.setPrev(next, prev);
    else this.tail = prev;
    this.set(item, null, null, false);
  }

  listed(item: T): boolean {
    return this.slot === 0 ? item.in0 : item.in1;
  }

  /** Takes the oldest off the list if it joined (`joinedAt`) at or before `oldest`; null once none did. */
  shiftJoinedBy(oldest: number, joinedAt: (item: T) => number): T | null {
    const item = this.head;
    if (item === null || joinedAt(item) > oldest) return null;
    this.remove(item);
    return item;
  }

  /** Every item, oldest first (a copy: the caller may remove them meanwhile). */
  items(): T[] {
    const out: T[] = [];
    for (let t = this.head; t; t = this.slot === 0 ? t.next0 : t.next1) out.push(t);
    return out;
  }

  private set(item: T, prev: T | null, next: T | null, listed: boolean): void {
    if (this.slot === 0) {
      item.prev0 = prev;
      item.next0 = next;
      item.in0 = listed;
    } else {
      item.prev1 = prev;
      item.next1 = next;
      item.in1 = listed;
    }
  }

  private setNext(item: T, next: T | null): void {
    if (this.slot === 0) item.next0 = next;
    else item.next1 = next;
  }

  private setPrev(item: T, prev: T | null): void {
    if (this.slot === 0) item.prev0 = prev;
    else item.prev1 = prev;
  }
}
