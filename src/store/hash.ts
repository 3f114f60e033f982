// Choosing the shard of a key: rendezvous (highest random weight) hashing. Going from N to N+1
// servers moves about 1/(N+1) of keys, where hash modulo N would move about N/(N+1) of them.
import keySlot from "cluster-key-slot";

/** FNV-1a over UTF-16 code units, 32 bits. */
export function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A 32-bit finalizer (avalanche): every input bit affects every output bit. */
export function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

export class Rendezvous {
  private readonly seeds: number[];

  /** ids name the servers (e.g. host:port), so a server keeps its keys whatever its place in the list. */
  constructor(ids: readonly string[]) {
    this.seeds = ids.map((id) => mix32(fnv1a32(id)));
  }

  pick(key: string): number {
    const h = fnv1a32(key);
    let best = 0;
    let bestScore = -1;
    for (let i = 0; i < this.seeds.length; i++) {
      const score = mix32(h ^ this.seeds[i]);
      if (score > bestScore) {
        bestScore = score;
        best = i;
      }
    }
    return best;
  }
}

/**
 * The Redis Cluster slot of a hash tag's text (the bytes between a key's braces; keys.ts escapes braces, so
 * the text has none): cluster-key-slot, the function ioredis routes every command with, so sluice's grouping
 * of keys by slot always agrees with ioredis's.
 */
export function clusterSlot(tag: string): number {
  return keySlot(tag);
}
