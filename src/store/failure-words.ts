// sluice's own words for a store failure: what failed, in a short phrase an operator can act on, with the
// library's or the system's text kept apart as `detail` (never in a message, an answer or a log line's reason).
import { ReplyError } from "ioredis";
import { StoreTimeoutError } from "./deadline.js";
import { StoreUnavailableError } from "./store.js";

export interface FailureWords {
  /** What failed, in sluice's words: "connection refused", "no reply within 20 ms", ... */
  reason: string;
  /** The library's or the system's own text, for a detail field only. */
  detail: string;
  /** The node could not be reached at all (as opposed to: it answered with an error). */
  unreachable: boolean;
}

/** Socket and lookup errors by their code. */
const CODES: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ECONNABORTED: "connection aborted",
  EPIPE: "connection broken",
  ETIMEDOUT: "connecting timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed",
  ENOENT: "no such socket file",
  EACCES: "permission denied on the socket",
};

/** ioredis's and TLS's texts (a message has no code) to sluice's words. */
const TEXTS: [RegExp, string][] = [
  // First: its message ends with the last error's text.
  [/All sentinels are unreachable/i, "no sentinel answered"],
  [/Stream isn't writeable|enableOfflineQueue|Connection is closed|max retries per request|Connection in subscriber mode/i, "not connected"],
  [/connect ETIMEDOUT|connect timeout|Connection timeout/i, "connecting timed out"],
  [/certificate|self[- ]signed|unable to verify|CERT_|SSL|TLS/i, "TLS handshake failed (certificate not trusted or not valid)"],
  [/WRONGPASS|NOAUTH|invalid (username-)?password|AUTH failed/i, "authentication failed"],
  [/role invalid|Failed to connect to (a|the) (master|slave)/i, "the sentinels named no usable master"],
];

/** Redis error codes (the first word of an error reply) to sluice's words. */
const REPLY_CODES: Record<string, string> = {
  NOPERM: "the Redis user may not run a command sluice needs",
  NOAUTH: "authentication failed",
  WRONGPASS: "authentication failed",
  READONLY: "the server is a read-only replica",
  LOADING: "the server is loading its data",
  OOM: "the server is out of memory (maxmemory)",
  BUSY: "the server is busy running a script",
  MASTERDOWN: "the replica lost its master",
  CLUSTERDOWN: "the cluster is down",
  TRYAGAIN: "a slot is being moved",
  NOSCRIPT: "the script is not loaded",
  WRONGTYPE: "a key holds another kind of value",
  EXECABORT: "the transaction was aborted",
};

export function failureWords(err: unknown): FailureWords {
  // A StoreUnavailableError carries its cause's words already.
  if (err instanceof StoreUnavailableError && err.reason !== undefined)
    return { reason: err.reason, detail: err.detail ?? "", unreachable: err.unreachable ?? false };
  const detail = err instanceof Error ? err.message : String(err);
  if (err instanceof StoreTimeoutError) return { reason: `no reply ${detail.replace(/^timed out after/, "within")}`, detail, unreachable: false };
  if (err instanceof ReplyError) return { reason: replyWords(detail), detail, unreachable: false };
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === "string" && CODES[code]) return { reason: CODES[code], detail, unreachable: true };
  for (const [re, words] of TEXTS) if (re.test(detail)) return { reason: words, detail, unreachable: true };
  // A Node socket error as text ("connect ECONNREFUSED 127.0.0.1:6379"), e.g. from an 'error' event's message.
  const m = /\b(E[A-Z_]{3,})\b/.exec(detail);
  if (m && CODES[m[1]]) return { reason: CODES[m[1]], detail, unreachable: true };
  return { reason: "the connection failed", detail, unreachable: true };
}

/** An error reply's words: its code's, naming the command where the reply or sluice's script names one. */
export function replyWords(message: string): string {
  const kind = replyKind(message);
  if (kind.code === "NOPERM") return kind.command ? `the Redis user may not run ${kind.command}` : REPLY_CODES.NOPERM;
  return REPLY_CODES[kind.code] ?? `Redis answered an error (${kind.code})`;
}

/** An error reply's kind: its code (NOPERM for any ACL refusal) and the command it names, if any. */
export function replyKind(message: string): { code: string; command: string | undefined } {
  const acl = /^NOPERM\b|can't run this command|no permissions to run/.test(message);
  // sluice's scripts name the command they were refused (lua/count.lua: "NOPERM pexpireat: ..."); Redis's own
  // NOPERM reply names it in quotes.
  const named = /^NOPERM ([a-z|]+):/.exec(message)?.[1] ?? /'([a-z|]+)' command/.exec(message)?.[1];
  const first = /^([A-Z]{2,20})\b/.exec(message)?.[1] ?? "ERR";
  return { code: acl ? "NOPERM" : first, command: named };
}

/** The sentence for a failed call to a node: the store, then what failed. */
export function failureSentence(node: string, what: string, w: FailureWords): string {
  if (w.unreachable) return `Redis ${node} is unreachable (${w.reason})`;
  if (w.reason.startsWith("no reply")) return `Redis ${node} did not answer the ${what} (${w.reason})`;
  return `Redis ${node} refused the ${what}: ${w.reason}`;
}

/** A failed call to a node as the error the limiter answers by policy. */
export function storeFailure(node: string, what: string, err: unknown): StoreUnavailableError {
  if (err instanceof StoreUnavailableError) return err;
  const w = failureWords(err);
  return new StoreUnavailableError(failureSentence(node, what, w), err, w);
}
