// Transport-free request and decision shapes: server/ converts to and from the wire.
import type { Limit, Unit } from "../rules/model.js";

/** One key=value pair of a request descriptor. */
export interface DescriptorEntry {
  key: string;
  value: string;
}

export interface DescriptorRequest {
  entries: DescriptorEntry[];
  /** Per-request `limit` override (fixed window, known domains only). */
  override?: { requestsPerUnit: number; unit: Unit };
  /** The descriptor's own hits_addend when present (0 = check without consuming). */
  hits?: number;
}

export interface RateLimitRequest {
  domain: string;
  descriptors: DescriptorRequest[];
  /** Request-level hits_addend; 0 means 1. */
  hitsAddend: number;
}

export type Code = "OK" | "OVER_LIMIT";

export interface DescriptorDecision {
  code: Code;
  /** The limit reported for this descriptor: the one that refused, else the one with the least left. */
  limit?: Limit;
  remaining: number;
  /** Whole seconds until fully reset; absent when no limit matched. */
  resetSeconds?: number;
  /** When this descriptor refused: ms until the same request would pass; -1 never. */
  retryAfterMs?: number;
}

/**
 * How one limit was decided: by the store, from the deny note, by the failure policy of the limit
 * (the store failed or was too slow), or statically (unlimited, requests_per_unit 0).
 */
export type Via = "store" | "approximate" | "deny_note" | "policy_allow" | "policy_deny" | "policy_local" | "static";

/** One limit's own outcome, for metrics: every limit evaluated for a request, in request order. */
export interface LimitOutcome {
  /** Index of the descriptor in the request. */
  index: number;
  limit: Limit;
  hits: number;
  /** This limit alone let the request through (a shadow limit reports its own verdict). */
  allowed: boolean;
  remaining: number;
  via: Via;
}

export interface Decision {
  code: Code;
  statuses: DescriptorDecision[];
  /** Whole seconds until the whole request would pass; absent when OK or when it never can. */
  retryAfterSeconds?: number;
  /** Set when a quota refused: when the latest refusing quota resets (ms since the epoch). */
  quotaResetsAtMs?: number;
  /**
   * Global shadow mode turned this answer to OK: the limits refuse the request (statuses keep their
   * OVER_LIMIT; nothing was consumed, as for a refusal).
   */
  shadowed?: boolean;
  /** Metadata of matched rules, by descriptor index (sluice's own dynamic_metadata shape). */
  metadata?: { index: number; metadata: Record<string, unknown> }[];
  /** The reference's dynamic_metadata instead (RESPONSE_DYNAMIC_METADATA): a Struct as a plain object. */
  dynamicMetadata?: Record<string, unknown>;
  /** Headers for the client (the reference's RateLimit-* headers), after Retry-After when refused. */
  headers?: { key: string; value: string }[];
  outcomes: LimitOutcome[];
}

/** A request the limiter refuses to evaluate (maps to INVALID_ARGUMENT). */
export class InvalidRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidRequestError";
  }
}
