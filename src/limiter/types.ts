// Transport-free request and decision shapes: server/grpc.ts converts to and from the wire.
import type { Limit, Unit } from "../rules/model.js";

export interface Entry {
  key: string;
  value: string;
}

export interface DescriptorRequest {
  entries: Entry[];
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
  /** The limit that decided this descriptor; absent when nothing matched (or unlimited). */
  limit?: Limit;
  remaining: number;
  /** Whole seconds until fully reset; absent when no limit matched. */
  resetSeconds?: number;
  /** When this descriptor refused: seconds until the same request would pass; -1 never. */
  retryAfterSeconds?: number;
}

export interface Decision {
  code: Code;
  statuses: DescriptorDecision[];
  /** Whole seconds until the whole request would pass; absent when OK or when it never can. */
  retryAfterSeconds?: number;
  /** Metadata of matched rules, by descriptor index. */
  metadata?: { index: number; metadata: Record<string, unknown> }[];
}

/** A request the limiter refuses to evaluate (maps to INVALID_ARGUMENT). */
export class InvalidRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidRequestError";
  }
}
