// Sharding over independent Redis servers: rendezvous hashing moves about 1/(N+1) of keys when a
// server is added, where hash modulo N moves about N/(N+1). The figures printed
// here are the ones in docs/operating.md ("Scale out").
import { describe, expect, it } from "vitest";
import { clusterSlot, Rendezvous } from "../../src/store/hash.js";
import { moduloPick } from "../helpers/modulo-pick.js";

const KEYS = Array.from({ length: 100_000 }, (_, i) => `edge:remote_address=10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
const servers = (n: number) => Array.from({ length: n }, (_, i) => `10.0.0.${i + 1}:7000`);

function moved(n: number): { rendezvous: number; modulo: number } {
  const before = new Rendezvous(servers(n));
  const after = new Rendezvous(servers(n + 1));
  let r = 0;
  let m = 0;
  for (const k of KEYS) {
    if (before.pick(k) !== after.pick(k)) r++;
    if (moduloPick(k, n) !== moduloPick(k, n + 1)) m++;
  }
  return { rendezvous: r / KEYS.length, modulo: m / KEYS.length };
}

describe("shard choice", () => {
  it.each([2, 3, 4, 8])("from %i to N+1 servers: rendezvous moves about 1/(N+1) of keys, modulo about N/(N+1)", (n) => {
    const f = moved(n);
    console.log(`N=${n} -> ${n + 1}: rendezvous ${(f.rendezvous * 100).toFixed(1)} %, modulo ${(f.modulo * 100).toFixed(1)} %`);
    expect(Math.abs(f.rendezvous - 1 / (n + 1))).toBeLessThan(0.01);
    expect(Math.abs(f.modulo - n / (n + 1))).toBeLessThan(0.01);
  });

  it("rendezvous: keys spread evenly, a server keeps its keys whatever its place in the list, and keys only leave a removed server", () => {
    const ids = servers(3);
    const ring = new Rendezvous(ids);
    const counts = [0, 0, 0];
    for (const k of KEYS) counts[ring.pick(k)]++;
    for (const c of counts) expect(Math.abs(c - KEYS.length / 3)).toBeLessThan(KEYS.length * 0.02);
    const reversed = new Rendezvous([...ids].reverse());
    for (const k of KEYS.slice(0, 1000)) expect(ids[ring.pick(k)]).toBe([...ids].reverse()[reversed.pick(k)]);
    const without = new Rendezvous([ids[0], ids[2]]);
    for (const k of KEYS.slice(0, 5000)) {
      const was = ids[ring.pick(k)];
      if (was !== ids[1]) expect([ids[0], ids[2]][without.pick(k)]).toBe(was);
    }
  });

  it("the Cluster slot is Redis's CRC16 of the hash tag", () => {
    // Values from CLUSTER KEYSLOT on a real Redis: {123456789} -> 12739, {foo} -> 12182.
    expect(clusterSlot("123456789")).toBe(12739);
    expect(clusterSlot("foo")).toBe(12182);
    expect(clusterSlot("edge:remote_address=203.0.113.7")).toBeGreaterThanOrEqual(0);
  });
});
