// The simplest shard choice, hash modulo N: what src/store/hash.ts's rendezvous hashing is compared with.
import { fnv1a32, mix32 } from "../../src/store/hash.js";

export function moduloPick(key: string, n: number): number {
  return mix32(fnv1a32(key)) % n;
}
