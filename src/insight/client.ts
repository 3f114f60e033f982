// A refused client as shown: the refused descriptor's entries, `k=v,k=v`. Values under secret keys
// (SLUICE_TOP_SECRET_KEYS) become `#` + the first 12 hex digits of HMAC-SHA256(SLUICE_TOP_HASH_KEY, value):
// the same value always shows the same, and nothing of it reaches the store, a page or a terminal.
import { secretHash } from "../core/secret.js";
import type { DescriptorEntry } from "../limiter/types.js";

/** Longer client labels are cut (a label is for reading, not a payload). */
const MAX_CLIENT_CHARS = 200;
/** Hashes remembered (a hot refused secret is hashed once); past it the cache starts again. */
const HASH_CACHE_MAX = 10_000;

export { secretHash };

export class ClientLabels {
  private readonly secret: Set<string>;
  private readonly cache = new Map<string, string>();

  constructor(
    secretKeys: readonly string[],
    private readonly hashKey: string,
  ) {
    this.secret = new Set(secretKeys);
  }

  label(entries: readonly DescriptorEntry[]): string {
    let out = "";
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i];
      const value = this.secret.size > 0 && this.secret.has(e.key) ? this.hashed(e.value) : e.value;
      out += (i > 0 ? "," : "") + e.key + "=" + value;
      if (out.length > MAX_CLIENT_CHARS) return out.slice(0, MAX_CLIENT_CHARS);
    }
    return out;
  }

  private hashed(value: string): string {
    let h = this.cache.get(value);
    if (h === undefined) {
      if (this.cache.size >= HASH_CACHE_MAX) this.cache.clear();
      h = secretHash(this.hashKey, value);
      this.cache.set(value, h);
    }
    return h;
  }
}
