// The deny note on the limiter, in process: a real MemoryStore on a manual clock, with a count of
// the calls that reach it.
import { describe, expect, it } from "vitest";
import { Limiter, type LimiterOptions } from "../../src/limiter/limiter.js";
import { toWireResponse } from "../../src/server/grpc/wire-response.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { MemoryStore } from "../../src/store/memory.js";
import type { Check } from "../../src/store/store.js";

const RULES = `
domain: n
descriptors:
  - key: hot
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket}
  - key: window
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: qa
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: qb
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`;
const rules = loadRuleFiles([{ name: "n.yaml", text: RULES }], { mergeDomains: false }).rules!;

/** A MemoryStore that counts the applies it receives. */
class CountingStore extends MemoryStore {
  applies = 0;
  override async apply(group: number, checks: Check[], dryRun?: boolean) {
    this.applies++;
    return super.apply(group, checks, dryRun);
  }
}

function setup(maxNotes = 100, options: LimiterOptions = {}) {
  const clock = new ManualClock(Date.parse("2027-06-01T00:00:00.000Z") * 1000);
  const store = new CountingStore({ clock });
  const limiter = new Limiter(rules, store, { clock, denyNoteMaxEntries: maxNotes, ...options });
  const call = (...pairs: [string, string][]) =>
    limiter.shouldRateLimit({ domain: "n", descriptors: pairs.map(([key, value]) => ({ entries: [{ key, value }] })), hitsAddend: 0 });
  return { clock, store, limiter, call };
}

describe("deny note", () => {
  it("after a refusal the key is refused from memory until its Retry-After, then the store is asked again", async () => {
    const { clock, store, call } = setup();
    for (let i = 0; i < 3; i++) await call(["window", "w"]);
    const first = await call(["window", "w"]);
    expect(first.code).toBe("OVER_LIMIT");
    expect(store.applies).toBe(4);
    expect(first.retryAfterSeconds).toBe(60);
    // Refused from memory: no store call, statuses filled, Retry-After counting down.
    clock.advance(20_500);
    const noted = await call(["window", "w"]);
    expect(store.applies).toBe(4);
    expect(noted.code).toBe("OVER_LIMIT");
    expect(noted.retryAfterSeconds).toBe(40);
    expect(toWireResponse(noted).statuses[0]).toEqual({
      code: 2,
      current_limit: { name: "", requests_per_unit: 3, unit: 2 },
      limit_remaining: 0,
      duration_until_reset: { seconds: 40, nanos: 0 },
    });
    expect(noted.outcomes.map((o) => o.via)).toEqual(["deny_note"]);
    // The window ends: the note is gone and the store decides again.
    clock.advance(39_500);
    expect((await call(["window", "w"])).code).toBe("OK");
    expect(store.applies).toBe(5);
  });

  it("a request with a noted key and a limit without a note asks the store: true figures, nothing consumed", async () => {
    const { store, call } = setup();
    await call(["hot", "h"]);
    await call(["hot", "h"]);
    expect((await call(["hot", "h"])).code).toBe("OVER_LIMIT");
    await call(["ip", "1.2.3.4"]);
    const applies = store.applies;
    const d = await call(["ip", "1.2.3.4"], ["hot", "h"]);
    expect(store.applies).toBe(applies + 1);
    expect(d.code).toBe("OVER_LIMIT");
    expect(d.statuses.map((s) => [s.code, s.remaining])).toEqual([
      ["OK", 99],
      ["OVER_LIMIT", 0],
    ]);
    expect(d.outcomes.map((o) => o.via)).toEqual(["store", "store"]);
    expect((await call(["ip", "1.2.3.4"])).statuses[0].remaining).toBe(98);
  });

  it("a request whose every store limit is noted is answered from memory", async () => {
    const { store, call } = setup();
    for (let i = 0; i < 3; i++) await call(["window", "w"]);
    for (let i = 0; i < 2; i++) await call(["hot", "h"]);
    const both = await call(["hot", "h"], ["window", "w"]);
    expect(both.outcomes.map((o) => o.allowed)).toEqual([false, false]);
    const applies = store.applies;
    const d = await call(["window", "w"], ["hot", "h"]);
    expect(store.applies).toBe(applies);
    expect(d.outcomes.map((o) => o.via)).toEqual(["deny_note", "deny_note"]);
  });

  it("token bucket: the note lasts until one token is back (500 ms at 2 per second)", async () => {
    const { clock, store, call } = setup();
    await call(["hot", "t"]);
    await call(["hot", "t"]);
    const refused = await call(["hot", "t"]);
    expect(refused.retryAfterSeconds).toBe(1);
    const applies = store.applies;
    clock.advance(499);
    expect((await call(["hot", "t"])).code).toBe("OVER_LIMIT");
    expect(store.applies).toBe(applies);
    clock.advance(1);
    expect((await call(["hot", "t"])).code).toBe("OK");
    expect(store.applies).toBe(applies + 1);
  });

  it("shadow-mode limits never create notes", async () => {
    const { store, call } = setup();
    for (let i = 0; i < 5; i++) expect((await call(["shadow", "s"])).code).toBe("OK");
    expect(store.applies).toBe(5);
  });

  it("is bounded: least recently used notes are dropped first; 0 disables it", async () => {
    const { store, limiter, call } = setup(2);
    for (const w of ["a", "b", "c"]) for (let i = 0; i < 4; i++) await call(["window", w]);
    expect(limiter.denyNoteCount).toBe(2);
    const applies = store.applies;
    await call(["window", "a"]); // dropped: asks the store
    await call(["window", "c"]); // kept: from memory
    expect(store.applies).toBe(applies + 1);

    const off = setup(0);
    for (let i = 0; i < 6; i++) await off.call(["window", "x"]);
    expect(off.store.applies).toBe(6);
    expect(off.limiter.denyNoteCount).toBe(0);
  });

  it("a note lives at most its maximum life, then one request asks the store again", async () => {
    const clock = new ManualClock(Date.parse("2027-06-01T00:00:00.000Z") * 1000);
    const store = new CountingStore({ clock });
    const limiter = new Limiter(rules, store, { clock, denyNoteMaxMs: 5000 });
    const call = () => limiter.shouldRateLimit({ domain: "n", descriptors: [{ entries: [{ key: "window", value: "m" }] }], hitsAddend: 0 });
    for (let i = 0; i < 4; i++) await call();
    const applies = store.applies;
    clock.advance(4999);
    const noted = await call();
    expect(store.applies).toBe(applies);
    expect(noted.retryAfterSeconds).toBe(56); // the store's figure, not the note's life
    clock.advance(1);
    expect((await call()).code).toBe("OVER_LIMIT");
    expect(store.applies).toBe(applies + 1);
  });

  it("quota_mode: refused from memory once every quota-mode limit is noted; one still passing asks the store", async () => {
    const { store, call } = setup();
    expect((await call(["qa", "x"])).code).toBe("OK");
    const first = await call(["qa", "x"], ["qb", "x"]); // qa over (noted), qb passes and consumes
    expect([first.code, first.statuses.map((s) => s.code)]).toEqual(["OK", ["OVER_LIMIT", "OK"]]);
    const refused = await call(["qa", "x"], ["qb", "x"]);
    expect([refused.code, refused.retryAfterSeconds, store.applies]).toEqual(["OVER_LIMIT", 60, 3]);
    const noted = await call(["qa", "x"], ["qb", "x"]);
    expect([noted.code, noted.retryAfterSeconds, store.applies]).toEqual(["OVER_LIMIT", 60, 3]);
    expect(noted.outcomes.map((o) => o.via)).toEqual(["deny_note", "deny_note"]);
    // qb of another value has no note: the store decides, and the request passes.
    const other = await call(["qa", "x"], ["qb", "y"]);
    expect([other.code, other.statuses.map((s) => [s.code, s.remaining]), store.applies]).toEqual([
      "OK",
      [
        ["OVER_LIMIT", 0],
        ["OK", 0],
      ],
      4,
    ]);
  });

  it("global quota mode: every store limit noted and a descriptor without a rule: OK from memory, nothing consumed", async () => {
    const { store, call } = setup(100, { globalQuotaMode: true });
    for (let i = 0; i < 4; i++) await call(["window", "g"]);
    const applies = store.applies;
    const d = await call(["window", "g"], ["nomatch", "1"]);
    expect([d.code, d.statuses.map((s) => s.code), d.outcomes.map((o) => o.via), store.applies]).toEqual(["OK", ["OVER_LIMIT", "OK"], ["deny_note"], applies]);
  });

  it("global shadow mode: a noted refusal is answered OK from memory, marked shadowed", async () => {
    const { store, call } = setup(100, { globalShadowMode: true });
    for (let i = 0; i < 3; i++) await call(["window", "s"]);
    const fourth = await call(["window", "s"]);
    expect([fourth.code, fourth.shadowed, store.applies]).toEqual(["OK", true, 4]);
    const fifth = await call(["window", "s"]);
    expect([fifth.code, fifth.shadowed, fifth.statuses[0].code, fifth.outcomes[0].via, store.applies]).toEqual(["OK", true, "OVER_LIMIT", "deny_note", 4]);
  });

  it("a rule reload clears the notes", async () => {
    const { store, limiter, call } = setup();
    for (let i = 0; i < 4; i++) await call(["window", "r"]);
    limiter.setRules(rules);
    const applies = store.applies;
    await call(["window", "r"]);
    expect(store.applies).toBe(applies + 1);
  });
});
