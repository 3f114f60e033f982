// Enum numbers of envoy.service.ratelimit.v3.RateLimitResponse, shared by both response encoders.
import type { Unit } from "../../rules/model.js";
import type { Code } from "../../limiter/types.js";

/** RateLimitResponse.Code. */
export const CODE_WIRE: Record<Code, number> = { OK: 1, OVER_LIMIT: 2 };

/** RateLimitResponse.RateLimit.Unit. */
export const UNIT_WIRE: Record<Unit, number> = {
  second: 1,
  minute: 2,
  hour: 3,
  day: 4,
  month: 5,
  year: 6,
  week: 7,
};
