// Per-request logging, at debug level only: which limits refused a request. Rule and limit names
// only, never descriptor values (they carry API keys, accounts and addresses; an override is named by its keys);
// a rule path holding a secret key's value shows its hash (core/secret.ts).
import type { Logger } from "pino";
import { NO_SECRETS, type SecretValues } from "../core/secret.js";
import type { Decision, RateLimitRequest } from "../limiter/types.js";

/** A function that logs refused requests when the logger is at debug or finer; undefined otherwise. */
export function refusalLogger(logger: Logger, secrets: SecretValues = NO_SECRETS): ((req: RateLimitRequest, decision: Decision) => void) | undefined {
  if (!logger.isLevelEnabled("debug")) return undefined;
  return (req, decision) => {
    if (decision.code !== "OVER_LIMIT") return;
    const refused = decision.outcomes
      .filter((o) => !o.allowed && !o.limit.shadowMode)
      .map((o) => ({ descriptor: o.index, rule: secrets.path(o.limit), limit: o.limit.label, via: o.via }));
    logger.debug({ domain: req.domain, refused, retryAfterSeconds: decision.retryAfterSeconds }, "over limit");
  };
}
