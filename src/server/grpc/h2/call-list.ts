// The calls waiting on something, oldest first: an intrusive doubly linked list, so a call joins and
// leaves it in O(1) with no allocation, and a sweep looks only at its head. A call may be in two such
// lists at once (its body not ended; its answer not written), with one Link for each.

/** A call's place in one list, with the time it joined (lists are in that order). */
export class Link<T> {
  prev: Link<T> | null = null;
  next: Link<T> | null = null;
  listed = false;
  at = 0;
  constructor(readonly item: T) {}
}

export class CallList<T> {
  private head: Link<T> | null = null;
  private tail: Link<T> | null = null;

  /** Joins at the tail; `at` must not be earlier than the tail's (performance.now() is monotonic). */
  push(link: Link<T>, at: number): void {
    if (link.listed) this.remove(link);
    link.listed = true;
    link.at = at;
    link.prev = this.tail;
    if (this.tail) this.tail.next = link;
    else this.head = link;
    this.tail = link;
  }

  remove(link: Link<T>): void {
    if (!link.listed) return;
    link.listed = false;
    if (link.prev) link.prev.next = link.next;
    else this.head = link.next;
    if (link.next) link.next.prev = link.prev;
    else this.tail = link.prev;
    link.prev = link.next = null;
  }

  /** Takes the oldest off the list if it joined at or before `oldest`; null once none did. */
  shiftJoinedBy(oldest: number): T | null {
    const link = this.head;
    if (link === null || link.at > oldest) return null;
    this.remove(link);
    return link.item;
  }

  /** Every item, oldest first (a copy: the caller may remove them meanwhile). */
  items(): T[] {
    const out: T[] = [];
    for (let l = this.head; l; l = l.next) out.push(l.item);
    return out;
  }
}
