// Store keys: domain, descriptor path and algorithm/window, escaped so that different
// descriptors never share a key and no client value can form a Redis Cluster hash tag.
//
// Layout: sluice:<domain>:<k1>=<v1>|<k2>=<v2>...:<algorithm tag>
//   fixed window:  ...:fw<window seconds>   (the window start is kept by the store, from its own clock)
//   token bucket:  ...:tb
// In every part `%`, `:`, `|`, `=`, `{`, `}` and `*` are percent-encoded; a share_threshold value is
// its pattern with the `*` left raw, so it can never equal an escaped literal value.

import type { Algorithm } from "../rules/model.js";

const NEEDS_ESCAPE = /[%:|={}*]/;
const ESCAPES: Record<string, string> = {
  "%": "%25", ":": "%3A", "|": "%7C", "=": "%3D", "{": "%7B", "}": "%7D", "*": "%2A",
};

export function escapePart(s: string): string {
  if (!NEEDS_ESCAPE.test(s)) return s;
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    out += ESCAPES[c] ?? c;
  }
  return out;
}

/** A wildcard pattern for a shared counter: every literal part escaped, the `*` kept raw. */
export function escapePattern(pattern: string): string {
  return pattern.split("*").map(escapePart).join("*");
}

export interface KeyEntry {
  key: string;
  /** Already escaped value part (escapePart of the request value, or escapePattern of a shared pattern). */
  valuePart: string;
}

export function algorithmTag(algorithm: Algorithm, windowSeconds: number): string {
  return algorithm === "token_bucket" ? "tb" : `fw${windowSeconds}`;
}

export function storeKey(domain: string, entries: readonly KeyEntry[], tag: string): string {
  let key = "sluice:" + escapePart(domain) + ":";
  for (let i = 0; i < entries.length; i++) {
    if (i > 0) key += "|";
    key += escapePart(entries[i].key) + "=" + entries[i].valuePart;
  }
  return key + ":" + tag;
}
