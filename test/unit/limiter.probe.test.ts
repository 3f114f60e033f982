// The deny note under concurrency: when a note expires, one request asks the store (the probe) and the
// others for that key wait for its answer. A real MemoryStore on a manual clock, behind a gate that
// holds store calls the way a network round trip does.
import { describe, expect, it } from "vitest";
import { Limiter } from "../../src/limiter/limiter.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { MemoryStore } from "../../src/store/memory.js";
import type { Check } from "../../src/store/store.js";

const RULES = `
domain: p
descriptors:
  - key: hot
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket}
`;
const rules = loadRuleFiles([{ name: "p.yaml", text: RULES }], { mergeDomains: false }).rules!;

/** Counts applies; an apply made while the store is held waits for that hold's release(). */
class GatedStore extends MemoryStore {
  applies = 0;
  private held: Promise<void> | undefined;
  private open: (() => void) | undefined;
  hold(): void {
    this.held = new Promise((r) => (this.open = r));
  }
  release(): void {
    this.held = undefined;
    this.open?.();
  }
  override async apply(group: number, checks: Check[], dryRun?: boolean) {
    this.applies++;
    await this.held;
    return super.apply(group, checks, dryRun);
  }
}

const settle = () => new Promise((r) => setImmediate(r));

async function setup() {
  const clock = new ManualClock(Date.parse("2027-06-01T00:00:00.000Z") * 1000);
  const store = new GatedStore({ clock });
  const limiter = new Limiter(rules, store, { clock });
  const call = () => limiter.shouldRateLimit({ domain: "p", descriptors: [{ entries: [{ key: "hot", value: "h" }] }], hitsAddend: 0 });
  // Burst of 2 spent, the third refused: noted for 500 ms (one token back at 2 per second).
  for (let i = 0; i < 3; i++) await call();
  expect(store.applies).toBe(3);
  return { clock, store, call };
}

describe("deny note probes", () => {
  it("ten requests when the note expires: the probe takes the one token back, one more asks and is refused, eight wait and are refused from the new note", async () => {
    const { clock, store, call } = await setup();
    clock.advance(500);
    store.hold();
    const answers = Array.from({ length: 10 }, () => call());
    await settle();
    expect(store.applies).toBe(4); // only the probe is at the store
    store.release();
    const codes = (await Promise.all(answers)).map((d) => d.code);
    expect(codes.filter((c) => c === "OK")).toHaveLength(1);
    expect(codes.filter((c) => c === "OVER_LIMIT")).toHaveLength(9);
    expect(store.applies).toBe(5); // the probe, then one waiter that found the bucket empty
    expect((await call()).code).toBe("OVER_LIMIT");
    expect(store.applies).toBe(5);
  });

  it("waiters wait for two probes at most, then ask the store themselves", async () => {
    const { clock, store, call } = await setup();
    clock.advance(500);
    store.hold();
    const answers = Array.from({ length: 6 }, () => call());
    await settle();
    expect(store.applies).toBe(4);
    // The first probe takes the token back; the second probe is held while another token comes back.
    store.release();
    store.hold();
    await settle();
    expect(store.applies).toBe(5);
    clock.advance(500);
    store.release();
    const codes = (await Promise.all(answers)).map((d) => d.code);
    // Two probes allowed (a token each); the four that waited twice went to the store and were refused.
    expect(codes.filter((c) => c === "OK")).toHaveLength(2);
    expect(store.applies).toBe(9);
  });

  it("a probe whose store call fails lets the waiters go on to the store", async () => {
    const { clock, store, call } = await setup();
    clock.advance(500);
    const failing = store.apply.bind(store);
    let fail = true;
    store.apply = async (group, checks) => {
      if (fail) {
        fail = false;
        store.applies++;
        throw new Error("store down");
      }
      return failing(group, checks);
    };
    const answers = await Promise.all([call(), call(), call()]);
    // The probe failed and was answered by its failure_mode (allow); the waiters asked the store.
    expect(answers[0].outcomes[0].via).toBe("policy_allow");
    expect(
      answers
        .slice(1)
        .map((d) => d.code)
        .sort(),
    ).toEqual(["OK", "OVER_LIMIT"]);
    expect(store.applies).toBe(6);
  });
});
