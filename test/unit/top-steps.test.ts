// /top's reads of a store in this process go in steps: the event loop gets turns while 100 rules' distinct
// clients are merged, and a rule's distinct count, once read, is kept for the second its buckets stay the same.
import { describe, expect, it } from "vitest";
import type { Limit } from "../../src/rules/model.js";
import { MemoryStore } from "../../src/store/memory.js";
import type { SummaryRead } from "../../src/store/summaries.js";
import { RefusalSummaries } from "../../src/insight/refusal-summaries.js";
import { readTop } from "../../src/insight/top-query.js";
import { windowByName } from "../../src/insight/windows.js";
import { ManualClock } from "../helpers/manual-clock.js";

async function refusingRules(count: number) {
  const clock = new ManualClock();
  const store = new MemoryStore({ clock });
  const now = () => Math.floor(clock.nowMicros() / 1000);
  const summaries = new RefusalSummaries({ store, keyPrefix: "", secretKeys: [], hashKey: "k", now });
  for (let i = 0; i < count; i++) {
    const limit = { path: `t.r${i}`, requestsPerUnit: 1, unit: "hour" } as Limit;
    for (let c = 0; c < 3; c++) summaries.refused("t", limit, [{ key: `r${i}`, value: `c${c}` }]);
  }
  await summaries.flush();
  const reads: SummaryRead[] = [];
  const read = store.readSummaries.bind(store);
  store.readSummaries = (group, r) => {
    reads.push(...r);
    return read(group, r);
  };
  return { store, now, clock, reads };
}

describe("/top on a store in this process", () => {
  it("lets the event loop turn while it reads, one read at a time", async () => {
    const t = await refusingRules(300);
    let turns = 0;
    const tick = () => {
      turns++;
      if (!done) setImmediate(tick);
    };
    let done = false;
    setImmediate(tick);
    const rules = await readTop(t.store, "", { window: windowByName("1m")!, n: 3, maxRules: 100 }, t.now());
    done = true;
    expect(rules.length).toBe(100);
    expect(rules.every((r) => r.refused === 3 && r.refused_clients === 3 && r.top.length === 3)).toBe(true);
    // The index, then one read per rule and kind: 1 + 100 x 2.
    expect(t.reads.length).toBe(201);
    // The loop turned while it read (all in one go, the memory store's reads resolve at once: no turn at all).
    // About 0.1 ms a read here: a turn every ten or so.
    expect(turns).toBeGreaterThanOrEqual(5);
  });

  it("keeps a rule's distinct count for a second: another question of the window reads only what differs", async () => {
    const t = await refusingRules(100);
    const window = windowByName("1h")!;
    const first = await readTop(t.store, "", { window, n: 0, maxRules: 100 }, t.now());
    expect(t.reads.filter((r) => r.kind === "distinct").length).toBe(100);
    t.clock.advance(999);
    const second = await readTop(t.store, "", { window, n: 2, maxRules: 100 }, t.now());
    expect(t.reads.filter((r) => r.kind === "distinct").length).toBe(100); // none read again
    expect(second.map((r) => r.refused_clients)).toEqual(first.map((r) => r.refused_clients));
    expect(second.every((r) => r.top.length === 2)).toBe(true);
    t.clock.advance(1);
    await readTop(t.store, "", { window, n: 0, maxRules: 100 }, t.now());
    expect(t.reads.filter((r) => r.kind === "distinct").length).toBe(200); // a second later: read afresh
  });
});
