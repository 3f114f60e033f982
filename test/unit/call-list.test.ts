import { describe, expect, it } from "vitest";
import { CallList, type Linked } from "../../src/server/grpc/h2/call-list.js";

interface Item extends Linked<Item> {
  name: string;
  /** When it joined, as a call's own time (its headers, its answer) is read by the sweeps. */
  at: number;
}

function items(...names: string[]): Item[] {
  return names.map((name) => ({ name, at: 0, prev0: null, next0: null, in0: false, prev1: null, next1: null, in1: false }));
}

function names(list: CallList<Item>): string[] {
  return list.items().map((i) => i.name);
}

const atOf = (item: Item): number => item.at;

describe("CallList", () => {
  it("keeps items oldest first and removes from the head, the middle and the tail", () => {
    const list = new CallList<Item>(0);
    const [a, b, c, d] = items("a", "b", "c", "d");
    for (const x of [a, b, c, d]) list.push(x);
    list.remove(b);
    expect(names(list)).toEqual(["a", "c", "d"]);
    list.remove(a);
    expect(names(list)).toEqual(["c", "d"]);
    list.remove(d);
    expect(names(list)).toEqual(["c"]);
    list.remove(c);
    expect(names(list)).toEqual([]);
    expect([a, b, c, d].map((i) => list.listed(i))).toEqual([false, false, false, false]);
    expect([a.prev0, a.next0, d.prev0, d.next0, a.in0]).toEqual([null, null, null, null, false]);
  });

  it("ignores removing an item that is not listed, and re-joins a listed one at the tail", () => {
    const list = new CallList<Item>(1);
    const [a, b] = items("a", "b");
    list.remove(a);
    list.push(a);
    list.push(b);
    list.remove(b);
    list.remove(b);
    expect(names(list)).toEqual(["a"]);
    list.push(b);
    list.push(a);
    expect(names(list)).toEqual(["b", "a"]);
  });

  it("shifts exactly the items that joined at or before a time, oldest first", () => {
    const list = new CallList<Item>(0);
    const [a, b, c] = items("a", "b", "c");
    [a.at, b.at, c.at] = [10, 20, 30];
    for (const x of [a, b, c]) list.push(x);
    expect(list.shiftJoinedBy(9, atOf)).toBeNull();
    const taken: string[] = [];
    for (let x = list.shiftJoinedBy(20, atOf); x !== null; x = list.shiftJoinedBy(20, atOf)) taken.push(x.name);
    expect(taken).toEqual(["a", "b"]);
    expect([a, b, c].map((i) => list.listed(i))).toEqual([false, false, true]);
    expect(names(list)).toEqual(["c"]);
    expect(list.shiftJoinedBy(30, atOf)).toBe(c);
    expect(list.shiftJoinedBy(Number.POSITIVE_INFINITY, atOf)).toBeNull();
  });

  it("lets one item sit in two lists at once, each list on its own slot's fields", () => {
    const bodies = new CallList<Item>(0);
    const writes = new CallList<Item>(1);
    const [x, y, z] = items("x", "y", "z");
    bodies.push(x);
    bodies.push(y);
    writes.push(z);
    writes.push(x);
    expect([x.in0, x.in1, x.prev1?.name, x.next0?.name]).toEqual([true, true, "z", "y"]);
    bodies.remove(x);
    expect(names(bodies)).toEqual(["y"]);
    expect(names(writes)).toEqual(["z", "x"]);
    expect([x.in0, x.in1, z.next1?.name]).toEqual([false, true, "x"]);
    expect(writes.shiftJoinedBy(0, atOf)).toBe(z);
    expect(writes.shiftJoinedBy(0, atOf)).toBe(x);
    expect(names(bodies)).toEqual(["y"]);
    expect([x.prev0, x.next0, x.prev1, x.next1, y.prev0, y.next0]).toEqual([null, null, null, null, null, null]);
  });
});
