// The slot map from CLUSTER NODES views: parsing, and merging by config epoch so a stale view never
// moves a slot back to the master that lost it.
import { describe, expect, it } from "vitest";
import { parseClusterNodes, SlotMap } from "../../src/store/cluster-map.js";

const BEFORE = [
  "a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460",
  "a2 127.0.0.1:7002@17002 master - 0 1 2 connected 5461-10922 [10923->-a3]",
  "a3 127.0.0.1:7003@17003,redis-3.example master - 0 1 3 connected 10923-16383",
  "b1 127.0.0.1:7004@17004 slave a1 0 1 1 connected",
  "x9 :0@0 master,noaddr - 0 1 0 disconnected",
].join("\n");
// 7001 failed; its replica 7004 won the election with epoch 7.
const AFTER = [
  "a1 127.0.0.1:7001@17001 master,fail - 0 0 1 disconnected",
  "a2 127.0.0.1:7002@17002 myself,master - 0 1 2 connected 5461-10922",
  "a3 127.0.0.1:7003@17003 master - 0 1 3 connected 10923-16383",
  "b1 127.0.0.1:7004@17004 master - 0 1 7 connected 0-5460",
].join("\n");

describe("parseClusterNodes", () => {
  it("reads address, role, failure flag, master and slot ranges; skips nodes without an address and migrations", () => {
    expect(parseClusterNodes(BEFORE)).toEqual([
      { addr: "127.0.0.1:7001", name: "a1", master: true, failing: false, replicaOf: undefined, epoch: 1, slots: [[0, 5460]] },
      { addr: "127.0.0.1:7002", name: "a2", master: true, failing: false, replicaOf: undefined, epoch: 2, slots: [[5461, 10922]] },
      { addr: "127.0.0.1:7003", name: "a3", master: true, failing: false, replicaOf: undefined, epoch: 3, slots: [[10923, 16383]] },
      { addr: "127.0.0.1:7004", name: "b1", master: false, failing: false, replicaOf: "a1", epoch: 1, slots: [] },
    ]);
    expect(parseClusterNodes(AFTER)[0]).toMatchObject({ addr: "127.0.0.1:7001", failing: true, slots: [] });
    expect(parseClusterNodes("garbage\n\n")).toEqual([]);
  });
});

describe("SlotMap", () => {
  it("moves slots to the claim with the higher epoch, and never back for a stale view", () => {
    const map = new SlotMap();
    expect(map.merge(parseClusterNodes(BEFORE))).toHaveLength(16384);
    expect(map.ownerOf(0)).toBe("127.0.0.1:7001");
    expect(map.roles.get("127.0.0.1:7004")).toEqual({ master: false, replicaOf: "127.0.0.1:7001", failing: false });

    const moved = map.merge(parseClusterNodes(AFTER));
    expect(moved).toHaveLength(5461);
    expect(moved[0]).toEqual({ slot: 0, from: "127.0.0.1:7001", to: "127.0.0.1:7004" });
    expect(map.ownerOf(5460)).toBe("127.0.0.1:7004");
    // A node that has not heard of the election yet still names 7001 (epoch 1): ignored.
    expect(map.merge(parseClusterNodes(BEFORE))).toEqual([]);
    expect(map.ownerOf(0)).toBe("127.0.0.1:7004");
    expect(map.counts()).toEqual({
      perNode: new Map([
        ["127.0.0.1:7004", 5461],
        ["127.0.0.1:7002", 5462],
        ["127.0.0.1:7003", 5461],
      ]),
      unowned: 0,
    });
  });

  it("a MOVED reply moves one slot until a view with a newer epoch says otherwise", () => {
    const map = new SlotMap();
    map.merge(parseClusterNodes(BEFORE));
    expect(map.moved(10923, "127.0.0.1:7002")).toBe(true);
    expect(map.moved(10923, "127.0.0.1:7002")).toBe(false);
    expect(map.ownerOf(10923)).toBe("127.0.0.1:7002");
    map.merge(parseClusterNodes(BEFORE)); // same epoch: the redirection stands
    expect(map.ownerOf(10923)).toBe("127.0.0.1:7002");
    map.merge(parseClusterNodes("a3 127.0.0.1:7003@17003 master - 0 1 9 connected 10923-16383"));
    expect(map.ownerOf(10923)).toBe("127.0.0.1:7003");
  });
});
