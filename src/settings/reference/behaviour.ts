// The reference's decision settings: global shadow and quota modes, response headers and metadata,
// key prefix, key expiry and increments.
import { ENV, SETTINGS } from "../../core/settings-table.js";
import { keyPrefixProblem } from "../../core/keys.js";
import { headerNameProblem } from "../../limiter/rate-limit-headers.js";
import type { ReferenceReader } from "./reader.js";

interface BehaviourPart {
  globalShadowMode: boolean;
  globalQuotaMode: boolean;
  /** STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: in the reference's keys, a refused request counts nowhere (as sluice's own keys always do). */
  referenceStopIncrement: boolean;
}

/** LIMIT_*_HEADER -> sluice's header name settings (the reference's defaults are sluice's). */
const HEADER_NAMES = [SETTINGS.RESPONSE_HEADER_LIMIT, SETTINGS.RESPONSE_HEADER_REMAINING, SETTINGS.RESPONSE_HEADER_RESET];

/**
 * `layout`: the environment is the reference's. Then its failure semantics (a store error fails the call,
 * UNAVAILABLE, and Envoy's failure_mode_deny decides) and its counter keys are sluice's defaults.
 */
export function readBehaviour(r: ReferenceReader, layout: boolean): BehaviourPart {
  if (layout) {
    if (!r.own("failure-mode", ENV.FAILURE_MODE)) r.map(ENV.FAILURE_MODE, "error");
    if (!r.own(undefined, ENV.REFERENCE_KEYS)) r.map(ENV.REFERENCE_KEYS, "true");
  }
  if (r.has("CACHE_KEY_PREFIX")) {
    const problem = keyPrefixProblem(r.str("CACHE_KEY_PREFIX", ""));
    if (problem) throw r.error("CACHE_KEY_PREFIX", problem);
    if (!r.own("key-prefix", ENV.KEY_PREFIX)) r.map(ENV.KEY_PREFIX, r.str("CACHE_KEY_PREFIX", ""));
  }

  r.int("EXPIRATION_JITTER_MAX_SECONDS", 300, 0, 1_000_000_000);
  r.ignore("EXPIRATION_JITTER_MAX_SECONDS", "sluice's keys expire exactly at their window's end");
  const stop = r.bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false);
  // Used with the reference's keys (on by default under its environment); sluice's own never count a refused request.
  if (!layout || r.own(undefined, ENV.REFERENCE_KEYS)) {
    r.ignore("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "used only with SLUICE_REFERENCE_KEYS: sluice's own keys never count a refused request");
  }

  // true: the reference's shape. false (its default) leaves sluice's own default (the matched rules'
  // metadata, only where rules carry `metadata`), as when unset.
  if (r.bool("RESPONSE_DYNAMIC_METADATA", false) && !r.own(undefined, ENV.RESPONSE_DYNAMIC_METADATA)) {
    r.map(ENV.RESPONSE_DYNAMIC_METADATA, "reference");
  }
  readHeaders(r);
  return { globalShadowMode: r.bool("SHADOW_MODE", false), globalQuotaMode: r.bool("QUOTA_MODE", false), referenceStopIncrement: stop };
}

/** LIMIT_RESPONSE_HEADERS_ENABLED and the names: SLUICE_RESPONSE_HEADERS and the three header names. */
function readHeaders(r: ReferenceReader): void {
  const enabled = r.bool("LIMIT_RESPONSE_HEADERS_ENABLED", false);
  if (enabled && !r.own(undefined, ENV.RESPONSE_HEADERS)) r.map(ENV.RESPONSE_HEADERS, "true");
  // Names count wherever the headers are on, by either variable.
  const used = enabled || r.own(undefined, ENV.RESPONSE_HEADERS);
  for (const { reference: name, env: sluiceName, default: fallback } of HEADER_NAMES) {
    const v = r.str(name, fallback);
    const problem = headerNameProblem(v);
    if (problem) throw r.error(name, problem);
    if (!r.has(name)) continue;
    if (!used) r.ignore(name, "used only with LIMIT_RESPONSE_HEADERS_ENABLED=true");
    else if (!r.own(undefined, sluiceName)) r.map(sluiceName, v);
  }
}
