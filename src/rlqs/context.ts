// What an RLQS stream (stream.ts) needs of its service (service.ts): options, bounds, counters, the clock.
import type { Logger } from "pino";
import type { BucketEntry } from "../core/bucket-id.js";
import type { Limit, RuleSet } from "../rules/model.js";
import type { Store } from "../store/store.js";

/** Streams open at once per sluice process (each Envoy filter config opens one). */
export const MAX_RLQS_STREAMS = 10_000;
/** Buckets one stream may report; a report past it ends the stream with RESOURCE_EXHAUSTED. */
export const MAX_BUCKETS_PER_STREAM = 10_000;
/** A bucket reported with no requests this long is abandoned (Envoy forgets it until its next request). */
export const IDLE_ABANDON_MS = 60_000;
/** Time to live of an assignment where the rule has no sync_interval_ms (and of blanket answers), in seconds. */
export const DEFAULT_TTL_SECONDS = 2;

export interface RlqsCounters {
  streamsOpen: number;
  buckets: number;
  assignmentsSent: number;
  denyAllSent: number;
  abandonsSent: number;
  unitsLeased: number;
  unitsReturned: number;
  storeCalls: number;
  /** Requests Envoy reported denied, in every bucket (those a limit counts also reach onDenied). */
  deniedReported: number;
}

export interface RlqsOptions {
  store: Store;
  /** Where `failure_mode: local` leases come from while the store fails: the limiter's in-process fallback. */
  fallback?: Store;
  rules: () => RuleSet;
  keyPrefix: string;
  logger: Logger;
  /** Told of the denied requests a usage report carries for a bucket, with the limit that denies it (/top counts them). */
  onDenied?: (domain: string, limit: Limit, entries: readonly BucketEntry[], denied: number) => void;
  maxStreams?: number;
  maxBucketsPerStream?: number;
  idleAbandonMs?: number;
  nowMs?: () => number;
}

export interface RlqsContext {
  readonly o: RlqsOptions;
  readonly counters: RlqsCounters;
  readonly maxBucketsPerStream: number;
  readonly idleAbandonMs: number;
  readonly now: () => number;
  gone(stream: unknown): void;
}
