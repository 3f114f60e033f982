// Store keys: domain, descriptor path and limit tag, escaped so that different descriptors never
// share a key and no client value can form a Redis Cluster hash tag.
//
// Layout: sluice:{<domain>:<k1>=<v1>|<k2>=<v2>...}:<limit tag>
//   fixed window:  ...:fw<window seconds>   (the window start is kept by the store, from its own clock)
//   token bucket:  ...:tb  (tb<unit seconds> when a descriptor has several buckets)
//   quota:         ...:q:<period>, e.g. q:2026-10 (month) or q:2026-10-31 (day), UTC
// The braces are the hash tag: every key of one descriptor lands in one Redis Cluster slot (and one
// shard), so its limits are decided in one atomic script. In every part `%`, `:`, `|`, `=`, `{`, `}`,
// `*` and `#` are percent-encoded; a share_threshold value is its pattern with the `*` left raw, so it
// can never equal an escaped literal value; a value longer than LONG_VALUE is replaced by `#` and
// its SHA-256 (128 bits, base64url), so one client can't make huge keys.
import { createHash } from "node:crypto";

const NEEDS_ESCAPE = /[%:|={}*#]/;
const ESCAPES: Record<string, string> = {
  "%": "%25", ":": "%3A", "|": "%7C", "=": "%3D", "{": "%7B", "}": "%7D", "*": "%2A", "#": "%23",
};

/** Values longer than this many characters are hashed in keys. */
export const LONG_VALUE = 64;

export function escapePart(s: string): string {
  if (!NEEDS_ESCAPE.test(s)) return s;
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    out += ESCAPES[c] ?? c;
  }
  return out;
}

/** A request value as it appears in a key: escaped, or hashed when long. */
export function valuePart(value: string): string {
  if (value.length <= LONG_VALUE) return escapePart(value);
  return "#" + createHash("sha256").update(value).digest("base64url").slice(0, 22);
}

/** A wildcard pattern for a shared counter: every literal part escaped, the `*` kept raw. */
export function escapePattern(pattern: string): string {
  return pattern.split("*").map(escapePart).join("*");
}

export function storeKey(hashTagText: string, limitTag: string): string {
  return "sluice:{" + hashTagText + "}:" + limitTag;
}
