// envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas: one bidirectional stream
// per Envoy (per filter config), on sluice's gRPC port. Envoy reports each bucket's use every reporting
// interval; sluice answers with assignments that are leases from the store's counters (stream.ts decides
// them). This file holds the service's bounds, its counters and the open streams.
import type { StreamCall, StreamService } from "../server/grpc/stream-contract.js";
import { IDLE_ABANDON_MS, MAX_BUCKETS_PER_STREAM, MAX_RLQS_STREAMS, type RlqsContext, type RlqsCounters, type RlqsOptions } from "./context.js";
import type { RlqsBucketView } from "../inspect/rules-json.js";
import { RlqsStream } from "./stream.js";

export { MAX_BUCKETS_PER_STREAM, MAX_RLQS_STREAMS, type RlqsBucketView, type RlqsOptions };

export const RLQS_PATH = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas";

export class RlqsService implements StreamService, RlqsContext {
  readonly path = RLQS_PATH;
  readonly maxCalls: number;
  readonly counters: RlqsCounters = {
    streamsOpen: 0,
    buckets: 0,
    assignmentsSent: 0,
    denyAllSent: 0,
    abandonsSent: 0,
    unitsLeased: 0,
    unitsReturned: 0,
    storeCalls: 0,
    deniedReported: 0,
  };
  readonly streams = new Set<RlqsStream>();
  readonly maxBucketsPerStream: number;
  readonly idleAbandonMs: number;
  readonly now: () => number;

  constructor(readonly o: RlqsOptions) {
    this.maxCalls = o.maxStreams ?? MAX_RLQS_STREAMS;
    this.maxBucketsPerStream = o.maxBucketsPerStream ?? MAX_BUCKETS_PER_STREAM;
    this.idleAbandonMs = o.idleAbandonMs ?? IDLE_ABANDON_MS;
    this.now = o.nowMs ?? Date.now;
  }

  open(call: StreamCall): RlqsStream {
    const s = new RlqsStream(this, call);
    this.streams.add(s);
    this.counters.streamsOpen = this.streams.size;
    return s;
  }

  gone(s: RlqsStream): void {
    this.streams.delete(s);
    this.counters.streamsOpen = this.streams.size;
  }

  /** Buckets of the open streams, at most `max` (for /rules: the total is counters.buckets). */
  buckets(max = Number.POSITIVE_INFINITY): RlqsBucketView[] {
    const out: RlqsBucketView[] = [];
    for (const s of this.streams) {
      if (out.length >= max) break;
      s.describe(out, max);
    }
    return out;
  }
}
