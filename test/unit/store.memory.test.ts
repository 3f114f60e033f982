// MemoryStore: the Store contract on a manual clock, plus its own bounds (LRU cap, expiry sweep).
import { describe, expect, it } from "vitest";
import { ManualClock } from "../helpers/manual-clock.js";
import { windowKey } from "../helpers/window-key.js";
import { InspectableMemoryStore } from "../helpers/inspectable-memory-store.js";
import { fw, runStoreContract, tb, type StoreHarness } from "../contract/store.contract.js";
import { DEFAULT_LOCAL_MAX_KEYS } from "../../src/limiter/limiter.js";

function memoryHarness(maxKeys?: number): () => Promise<StoreHarness> {
  return async () => {
    const clock = new ManualClock();
    const store = new InspectableMemoryStore({ clock, maxKeys });
    await store.start();
    return {
      store,
      advance: async (ms) => clock.advance(ms),
      cleanup: () => store.close(),
      nowMicros: async () => clock.nowMicros(),
      keys: async () => store.keys(),
      pttl: async (key) => store.pttl(key),
    };
  };
}

runStoreContract("memory", memoryHarness());
// The local fallback (failure_mode: local) is a MemoryStore as cli/serve-build.ts builds it: the same contract.
runStoreContract("local fallback", memoryHarness(DEFAULT_LOCAL_MAX_KEYS));

describe("MemoryStore bounds", () => {
  it("keeps at most maxKeys, dropping the least recently used", async () => {
    const store = new InspectableMemoryStore({ clock: new ManualClock(), maxKeys: 3 });
    for (const k of ["a", "b", "c"]) await store.apply(0, [fw(k, 5)]);
    await store.apply(0, [fw("a", 5, 0)]); // a read touches too
    await store.apply(0, [fw("d", 5)]);
    expect(store.keys().sort()).toEqual(["a", "c", "d"]);
    expect(store.size).toBe(3);
    expect((await store.apply(0, [fw("a", 5, 0)]))[0].remaining).toBe(4);
  });

  it("evicts exactly as a least-recently-used list would, over 3,000 random reads and writes (slots reused)", async () => {
    const store = new InspectableMemoryStore({ clock: new ManualClock(), maxKeys: 4 });
    const recency: string[] = []; // the model: least recently used first
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
    for (let i = 0; i < 3000; i++) {
      const key = `k${next() % 10}`;
      const read = next() % 3 === 0;
      await store.apply(0, [fw(key, 1_000_000, read ? 0 : 1)]);
      const held = recency.indexOf(key);
      // A read of a key not held stores nothing; any call on a held key makes it the most recently used.
      if (held >= 0) recency.splice(held, 1);
      if (held >= 0 || !read) recency.push(key);
      if (recency.length > 4) recency.shift();
      expect(store.keys().sort(), `after call ${i}`).toEqual([...recency].sort());
    }
  });

  it("sweeps expired entries incrementally, without touching them", async () => {
    const clock = new ManualClock();
    const store = new InspectableMemoryStore({ clock });
    for (let i = 0; i < 100; i++) await store.apply(0, [tb(`k${i}`, 2, 2)]); // TTL 1 s
    expect(store.size).toBe(100);
    clock.advance(1001);
    for (let i = 0; i < 20; i++) await store.apply(0, [fw("live", 1000)]);
    expect(store.size).toBe(1);
  });

  it("a fixed-window count does not survive into the next window", async () => {
    const clock = new ManualClock(3600 * 1_000_000 * 500_000 - 1000); // 1 ms before an hour boundary
    const store = new InspectableMemoryStore({ clock });
    expect((await store.apply(0, [fw("w", 1)]))[0]).toEqual({
      allowed: true,
      remaining: 0,
      resetSeconds: 1,
      retryAfterMs: -1,
      periodEndMs: expect.any(Number),
    });
    expect((await store.apply(0, [fw("w", 1)]))[0].allowed).toBe(false);
    const lastWindowKey = windowKey("w", 3600, clock.nowMicros() / 1000);
    clock.advance(1); // exactly the boundary: the key is still alive by Redis's rule, but another window's
    expect(store.pttl(lastWindowKey)).toBe(0);
    expect((await store.apply(0, [fw("w", 1)]))[0]).toEqual({
      allowed: true,
      remaining: 0,
      resetSeconds: 3600,
      retryAfterMs: -1,
      periodEndMs: expect.any(Number),
    });
    const thisWindowKey = windowKey("w", 3600, clock.nowMicros() / 1000);
    expect(thisWindowKey).not.toBe(lastWindowKey);
    expect(store.pttl(thisWindowKey)).toBe(3_600_000);
  });
});
