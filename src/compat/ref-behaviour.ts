// The reference's decision settings: global shadow and quota modes, response headers and metadata,
// key prefix, key expiry and increments.
import { keyPrefixProblem } from "../limiter/keys.js";
import type { ReferenceReader } from "./reader.js";

export interface ResponseHeaders {
  /** LIMIT_RESPONSE_HEADERS_ENABLED; only false until sluice adds the headers itself. */
  enabled: boolean;
  limit: string;
  remaining: string;
  reset: string;
}

export interface BehaviourPart {
  globalShadowMode: boolean;
  globalQuotaMode: boolean;
  responseHeaders: ResponseHeaders;
}

/** An HTTP header name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function readBehaviour(r: ReferenceReader): BehaviourPart {
  if (r.has("CACHE_KEY_PREFIX")) {
    const problem = keyPrefixProblem(r.str("CACHE_KEY_PREFIX", ""));
    if (problem) throw r.error("CACHE_KEY_PREFIX", problem);
    if (!r.own("key-prefix", "SLUICE_KEY_PREFIX")) r.map("SLUICE_KEY_PREFIX", r.str("CACHE_KEY_PREFIX", ""));
  }

  r.int("EXPIRATION_JITTER_MAX_SECONDS", 300, 0, 1_000_000_000);
  r.ignore("EXPIRATION_JITTER_MAX_SECONDS", "sluice's keys expire exactly at their window's end");
  r.bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false);
  r.ignore("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "sluice never counts a refused request, whatever this says");

  if (r.bool("RESPONSE_DYNAMIC_METADATA", false)) {
    throw r.error(
      "RESPONSE_DYNAMIC_METADATA",
      "the reference's dynamic metadata (domain, descriptors, hitsAddend) is not produced: sluice returns the matched rules' `metadata` as {\"descriptors\":[{\"index\":i,\"metadata\":{...}}]}; unset it",
    );
  }

  const responseHeaders: ResponseHeaders = {
    enabled: r.bool("LIMIT_RESPONSE_HEADERS_ENABLED", false),
    limit: header(r, "LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
    remaining: header(r, "LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
    reset: header(r, "LIMIT_RESET_HEADER", "RateLimit-Reset"),
  };
  if (responseHeaders.enabled) {
    throw r.error(
      "LIMIT_RESPONSE_HEADERS_ENABLED",
      "sluice does not add RateLimit-* headers itself yet; Envoy's filter adds x-ratelimit-* headers from sluice's statuses (enable_x_ratelimit_headers: DRAFT_VERSION_03)",
    );
  }
  for (const v of ["LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"]) r.ignore(v, "used only with LIMIT_RESPONSE_HEADERS_ENABLED=true");
  return { globalShadowMode: r.bool("SHADOW_MODE", false), globalQuotaMode: r.bool("QUOTA_MODE", false), responseHeaders };
}

function header(r: ReferenceReader, name: string, fallback: string): string {
  const v = r.str(name, fallback);
  if (!TOKEN.test(v) || v.length > 256) throw r.error(name, "must be an HTTP header name");
  return v;
}
