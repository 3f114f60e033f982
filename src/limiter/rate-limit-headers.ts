// The reference's rate-limit headers (its LIMIT_RESPONSE_HEADERS_ENABLED): limit, remaining and reset of
// one status, the one envoyproxy/ratelimit picks (src/service/ratelimit.go): the last refusing status of
// an ordinary descriptor, else the first status with the least left. Statuses without a limit (no rule,
// replaced) or with an unlimited one are never picked; with none left, no headers.
import type { DescriptorDecision } from "./types.js";

/** Header names (HTTP tokens, checked by settings/settings.ts). */
export interface RateLimitHeaderNames {
  limit: string;
  remaining: string;
  reset: string;
}

const MAX_UINT32 = 4294967295;

/** An HTTP header name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Why this cannot be a rate-limit header's name, or undefined. */
export function headerNameProblem(name: string): string | undefined {
  if (!TOKEN.test(name) || name.length > 256) return "must be an HTTP header name";
  // sluice sets these itself on a refusal.
  if (/^(content-type|retry-after)$/i.test(name)) return "must not be content-type or Retry-After (sluice sets them on a refusal)";
  return undefined;
}

/**
 * The three headers, or undefined when no status has a limit. quota marks quota-mode descriptors by
 * index (1): their refusals do not force the pick, as in the reference.
 */
export function rateLimitHeaders(
  names: RateLimitHeaderNames,
  statuses: readonly DescriptorDecision[],
  quota: Uint8Array | undefined,
): { key: string; value: string }[] | undefined {
  let picked: DescriptorDecision | undefined;
  let least = MAX_UINT32;
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i];
    if (!s.limit || s.limit.unlimited) continue;
    if (s.remaining < least) {
      picked = s;
      least = s.remaining;
    }
    if (s.code === "OVER_LIMIT" && (quota === undefined || quota[i] === 0)) {
      picked = s;
      least = 0;
    }
  }
  if (!picked) return undefined;
  return [
    { key: names.limit, value: String(picked.limit!.requestsPerUnit) },
    { key: names.remaining, value: String(picked.remaining) },
    { key: names.reset, value: String(picked.resetSeconds ?? 0) },
  ];
}
