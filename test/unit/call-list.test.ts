import { describe, expect, it } from "vitest";
import { CallList, Link } from "../../src/server/grpc/h2/call-list.js";

function links(...names: string[]): Link<string>[] {
  return names.map((n) => new Link(n));
}

describe("CallList", () => {
  it("keeps items oldest first and removes from the head, the middle and the tail", () => {
    const list = new CallList<string>();
    const [a, b, c, d] = links("a", "b", "c", "d");
    list.push(a, 1);
    list.push(b, 2);
    list.push(c, 3);
    list.push(d, 4);
    list.remove(b);
    expect(list.items()).toEqual(["a", "c", "d"]);
    list.remove(a);
    expect(list.items()).toEqual(["c", "d"]);
    list.remove(d);
    expect(list.items()).toEqual(["c"]);
    list.remove(c);
    expect(list.items()).toEqual([]);
    expect([a.listed, b.listed, c.listed, d.listed]).toEqual([false, false, false, false]);
    expect([a.prev, a.next, d.prev, d.next]).toEqual([null, null, null, null]);
  });

  it("ignores removing a link that is not listed, and re-joins a listed one at the tail", () => {
    const list = new CallList<string>();
    const [a, b] = links("a", "b");
    list.remove(a);
    list.push(a, 1);
    list.push(b, 2);
    list.remove(b);
    list.remove(b);
    expect(list.items()).toEqual(["a"]);
    list.push(b, 3);
    list.push(a, 4);
    expect(list.items()).toEqual(["b", "a"]);
  });

  it("shifts exactly the items that joined at or before a time, oldest first", () => {
    const list = new CallList<string>();
    const [a, b, c] = links("a", "b", "c");
    list.push(a, 10);
    list.push(b, 20);
    list.push(c, 30);
    expect(list.shiftJoinedBy(9)).toBeNull();
    const taken: string[] = [];
    for (let x = list.shiftJoinedBy(20); x !== null; x = list.shiftJoinedBy(20)) taken.push(x);
    expect(taken).toEqual(["a", "b"]);
    expect([a.listed, b.listed, c.listed]).toEqual([false, false, true]);
    expect(list.items()).toEqual(["c"]);
    expect(list.shiftJoinedBy(30)).toBe("c");
    expect(list.shiftJoinedBy(Number.POSITIVE_INFINITY)).toBeNull();
  });

  it("lets one item sit in two lists at once, each with its own link", () => {
    const bodies = new CallList<string>();
    const writes = new CallList<string>();
    const bodyLink = new Link("x");
    const writeLink = new Link("x");
    const other = new Link("y");
    bodies.push(bodyLink, 1);
    bodies.push(other, 2);
    writes.push(writeLink, 5);
    bodies.remove(bodyLink);
    expect(bodies.items()).toEqual(["y"]);
    expect(writes.items()).toEqual(["x"]);
    expect(writes.shiftJoinedBy(5)).toBe("x");
    expect(bodies.items()).toEqual(["y"]);
  });
});
