// Store keys: the only place that builds them (limiter, explain, rule loader and per-request override
// all call here). Domain, descriptor entries and limit tag, escaped so that different descriptors never
// share a key and no client value can form a Redis Cluster hash tag.
//
// Layout: [prefix]sluice:{<domain>:<k1>=<v1>|<k2>=<v2>...}:<limit tag>
//   prefix: --key-prefix (the reference's CACHE_KEY_PREFIX), "" by default, so deployments can share a Redis
//   hash tag (descriptorTag): per entry its key and value; a share_threshold entry has its rule's pattern
//   limit tag (limitTag, quotaKeyTag):
//     fixed window:  fw<window seconds> in even windows, fw<window seconds>:1 in odd ones (oddWindowKey;
//                    which window is the store's clock's; the key expires at its window's end)
//     token bucket:  tb  (tb<unit seconds> when a descriptor has several buckets)
//     sliding window: sw<window seconds>  (the window index is kept in the value, from the store's clock)
//     quota:         q:<period>, e.g. q:2026-10 (month) or q:2026-10-31 (day), UTC; the period label is
//                    made by counters/calendar.ts (Period.label) and is part of the key: changing it orphans counters
// The braces are the hash tag: every key of one descriptor lands in one Redis Cluster slot (and one
// shard), so its limits are decided in one atomic script. In every part `%`, `:`, `|`, `=`, `{`, `}`,
// `*` and `#` are percent-encoded; a share_threshold value is its pattern with the `*` left raw, so it
// can never equal an escaped literal value; a value longer than LONG_VALUE is replaced by `#` and
// its SHA-256 (128 bits, base64url), so one client can't make huge keys; the value of a secret key
// (SLUICE_TOP_SECRET_KEYS) by `#` and its keyed hash (core/secret.ts), so it never reaches the store.
// The reference's own keys (referenceKeyBase) keep values raw: the reference reads the same keys.
import { createHash } from "node:crypto";
import type { SecretValues } from "./secret.js";

/** What a key takes from a request descriptor (limiter/types.ts DescriptorRequest). */
interface KeyedDescriptor {
  entries: readonly { key: string; value: string }[];
}

/** What a key takes from a matched rule node (rules/model.ts RuleNode), one per entry. */
type MatchedNodes = readonly { shareThreshold: boolean; value: string }[] | undefined;

const NEEDS_ESCAPE = /[%:|={}*#]/;
const ESCAPES: Record<string, string> = {
  "%": "%25",
  ":": "%3A",
  "|": "%7C",
  "=": "%3D",
  "{": "%7B",
  "}": "%7D",
  "*": "%2A",
  "#": "%23",
};

/** Values longer than this many characters are hashed in keys. */
const LONG_VALUE = 64;

function escapePart(s: string): string {
  if (!NEEDS_ESCAPE.test(s)) return s;
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    out += ESCAPES[c] ?? c;
  }
  return out;
}

/** A request value as it appears in a key: escaped, or hashed when long. */
function valuePart(value: string): string {
  if (value.length <= LONG_VALUE) return escapePart(value);
  return "#" + createHash("sha256").update(value).digest("base64url").slice(0, 22);
}

/** A wildcard pattern for a shared counter: every literal part escaped, the `*` kept raw. */
function escapePattern(pattern: string): string {
  return pattern.split("*").map(escapePart).join("*");
}

/**
 * The hash tag of a descriptor's keys: its entries, or a shared pattern where share_threshold says so. The value
 * of a secret key (`secrets`) is its keyed hash, `#` + 32 hex digits: it never reaches the store in clear, and an
 * escaped value (a `#` is %23) or a long value's hash (22 base64url characters) can never equal it.
 */
export function descriptorTag(domain: string, d: KeyedDescriptor, matched: MatchedNodes, secrets?: SecretValues): string {
  const entries = d.entries;
  let tag = escapePart(domain) + ":";
  for (let i = 0; i < entries.length; i++) {
    const node = matched?.[i];
    const e = entries[i];
    const value = node?.shareThreshold ? escapePattern(node.value) : secrets?.isSecret(e.key) ? secrets.inKey(e.value) : valuePart(e.value);
    tag += (i > 0 ? "|" : "") + escapePart(e.key) + "=" + value;
  }
  return tag;
}

/** A limit's tag: "fw" or "tb" with the unit's seconds when keys must tell units apart; "q" alone for a quota. */
export function limitTag(prefix: "fw" | "tb" | "sw" | "q", unitSeconds?: number): string {
  return prefix + (unitSeconds ?? "");
}

/** A quota's limit tag in the key: one counter per calendar period (label from counters/calendar.ts). */
export function quotaKeyTag(periodLabel: string): string {
  return "q:" + periodLabel;
}

export function storeKey(hashTagText: string, limitTag: string, prefix = ""): string {
  return prefix + "sluice:{" + hashTagText + "}:" + limitTag;
}

/**
 * What a fixed window's key has added in odd windows (epoch seconds / window length odd); even windows use
 * the key itself. Two keys, so a key the store still holds is the current window's (lua/fixed_window.lua,
 * which is sent the even key and adds this itself: lua-library.ts writes it into the library).
 */
export const ODD_WINDOW_SUFFIX = ":1";

/** A fixed window's key in odd windows (ODD_WINDOW_SUFFIX). */
export function oddWindowKey(key: string): string {
  return key + ODD_WINDOW_SUFFIX;
}

/**
 * envoyproxy/ratelimit's key of a descriptor without its window start (SLUICE_REFERENCE_KEYS):
 * `<prefix><domain>_<k1>_<v1>_..._<kn>_<vn>_`, values raw as it writes them (a share_threshold entry its
 * pattern). The store's clock appends the window start (lua/reference_fixed_window.lua).
 */
export function referenceKeyBase(prefix: string, domain: string, d: KeyedDescriptor, matched: MatchedNodes): string {
  let key = prefix + domain + "_";
  for (let i = 0; i < d.entries.length; i++) {
    const node = matched?.[i];
    key += d.entries[i].key + "_" + (node?.shareThreshold ? node.value : d.entries[i].value) + "_";
  }
  return key;
}

/** Longest key prefix accepted. */
const KEY_PREFIX_MAX = 128;

/**
 * Why a key prefix cannot be used, or undefined. Printable ASCII without spaces; no `{` or `}`: Redis
 * Cluster would take a hash tag from the prefix and put every key in one slot, away from where sluice
 * routes it.
 */
export function keyPrefixProblem(prefix: string): string | undefined {
  if (prefix.length > KEY_PREFIX_MAX) return `is longer than ${KEY_PREFIX_MAX} characters`;
  if (/[{}]/.test(prefix)) return "must not contain { or } (a Redis Cluster hash tag)";
  if (!/^[\x21-\x7e]*$/.test(prefix)) return "takes printable ASCII characters without spaces";
  return undefined;
}

/** The SCAN MATCH (and ACL key) pattern of every key a deployment with this prefix writes. */
export function keyScanPattern(prefix = ""): string {
  return prefix.replace(/[*?[\]\\]/g, (c) => "\\" + c) + "sluice:*";
}
