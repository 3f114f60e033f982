// SplitByUnitStore: the Store contract (a main-store group), and through the real limiter: per-second
// limits in their own store, one call per store per request, refunds across stores, a failing
// per-second store answered by its limits' failure policy alone. Two real MemoryStores on a manual clock.
import { describe, expect, it } from "vitest";
import { Limiter } from "../../src/limiter/limiter.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { InspectableMemoryStore } from "../helpers/inspectable-memory-store.js";
import { SplitByUnitStore } from "../../src/store/split-by-unit.js";
import { StoreUnavailableError, type Check } from "../../src/store/store.js";
import { runStoreContract } from "../contract/store.contract.js";

runStoreContract("split-by-unit (main store groups)", async () => {
  const clock = new ManualClock();
  const main = new InspectableMemoryStore({ clock });
  const store = new SplitByUnitStore(main, new InspectableMemoryStore({ clock }));
  await store.start();
  return {
    store,
    advance: async (ms) => clock.advance(ms),
    cleanup: () => store.close(),
    nowMicros: async () => clock.nowMicros(),
    keys: async () => main.keys(),
    pttl: async (key) => main.pttl(key),
  };
});

const RULES = `
domain: s
descriptors:
  - key: both
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: 10}
  - key: min
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: sec
    failure_mode: deny
    rate_limit: {unit: second, requests_per_unit: 5}
`;
const rules = loadRuleFiles([{ name: "s.yaml", text: RULES }], { mergeDomains: false }).rules!;

/** A MemoryStore counting its applies; `down` makes it fail as a Redis node would. */
class Node extends InspectableMemoryStore {
  applies = 0;
  down = false;
  override async apply(group: number, checks: Check[], dryRun?: boolean) {
    this.applies++;
    if (this.down) throw new StoreUnavailableError("node down");
    return super.apply(group, checks, dryRun);
  }
}

function setup() {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 0, 100) * 1000);
  const main = new Node({ clock });
  const perSecond = new Node({ clock });
  const store = new SplitByUnitStore(main, perSecond);
  const limiter = new Limiter(rules, store, { clock, denyNoteMaxEntries: 0 });
  const ask = (descriptors: Record<string, string>[], hits = 0) =>
    limiter.shouldRateLimit({
      domain: "s",
      hitsAddend: hits,
      descriptors: descriptors.map((d) => ({ entries: Object.entries(d).map(([key, value]) => ({ key, value })) })),
    });
  return { main, perSecond, store, ask };
}

describe("SplitByUnitStore", () => {
  it("encodes the store in the group: even = main, odd = per-second", () => {
    const { store } = setup();
    expect([store.groupOf("t"), store.groupOf("t", 60), store.groupOf("t", 1)]).toEqual([0, 0, 1]);
    expect(store.status()).toEqual({
      kind: "memory+per_second:memory",
      nodes: [
        { id: "memory", state: "up", inFlight: 0 },
        { id: "per_second/memory", state: "up", inFlight: 0 },
      ],
    });
  });

  it("per-second keys in the per-second store, the rest in the main one, one call each", async () => {
    const { main, perSecond, ask } = setup();
    const d = await ask([{ both: "a" }, { min: "b" }, { sec: "c" }]);
    expect([d.code, d.statuses.map((s) => s.remaining)]).toEqual(["OK", [1, 9, 4]]);
    expect([main.keys().sort(), perSecond.keys().sort()]).toEqual([
      ["sluice:{s:both=a}:fw60", "sluice:{s:min=b}:fw60"],
      ["sluice:{s:both=a}:fw1", "sluice:{s:sec=c}:fw1"],
    ]);
    expect([main.applies, perSecond.applies]).toEqual([1, 1]);
  });

  it("a refusal in the per-second store gives back the main store's hits", async () => {
    const { main, ask } = setup();
    expect((await ask([{ both: "r" }])).code).toBe("OK");
    expect((await ask([{ both: "r" }])).code).toBe("OK");
    expect((await ask([{ both: "r" }, { min: "m" }])).code).toBe("OVER_LIMIT");
    const left = await main.apply(0, [
      { key: "sluice:{s:both=r}:fw60", algorithm: "fixed_window", capacity: 10, windowSeconds: 60, hits: 0, shadow: false },
      { key: "sluice:{s:min=m}:fw60", algorithm: "fixed_window", capacity: 10, windowSeconds: 60, hits: 0, shadow: false },
    ]);
    expect(left.map((r) => r.remaining)).toEqual([8, 10]);
  });

  it("a failing per-second store sends only per-second limits to their failure policy", async () => {
    const { main, perSecond, ask } = setup();
    perSecond.down = true;
    const d = await ask([{ both: "x" }, { min: "y" }]);
    expect([d.code, d.outcomes.map((o) => [o.limit.unit, o.via, o.remaining])]).toEqual([
      "OK",
      [
        ["second", "policy_allow", 2],
        ["minute", "store", 9],
        ["minute", "store", 9],
      ],
    ]);
    expect((await ask([{ sec: "z" }])).code).toBe("OVER_LIMIT"); // failure_mode: deny
    expect([main.applies, perSecond.applies]).toEqual([1, 2]);
  });
});
