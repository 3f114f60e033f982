// A real gRPC client for sluice's RLQS service (StreamRateLimitQuotas), without Envoy: a test writes usage
// reports as Envoy's rate_limit_quota filter would, and reads what each bucket was told.
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { LOADER_OPTIONS } from "./grpc-client.js";

const def = protoLoader.loadSync(["envoy/service/rate_limit_quota/v3/rlqs.proto"], LOADER_OPTIONS);
const Rlqs = (grpc.loadPackageDefinition(def) as any).envoy.service.rate_limit_quota.v3.RateLimitQuotaService;

interface Action {
  bucket_id: { bucket: Record<string, string> };
  quota_assignment_action?: { rate_limit_strategy?: { blanket_rule?: number; token_bucket?: { max_tokens: number } } };
  abandon_action?: object;
}

export interface BucketUsage {
  bucket_id: { bucket: Record<string, string> };
  num_requests_allowed: number;
  num_requests_denied: number;
}

export interface RlqsClient {
  /** A new stream (one per Envoy filter config in real life). */
  open(): RlqsStream;
  close(): void;
}

export interface RlqsStream {
  /** What each bucket was told, oldest first, by its id as text (`k=v,k=v`, keys sorted): see `said`. */
  readonly seen: Record<string, string[]>;
  /** Answers received. */
  readonly answers: number;
  /** The stream's error, once it ended with one. */
  readonly ended: string | undefined;
  report(domain: string, usages: BucketUsage[]): void;
  end(): void;
}

/** A bucket's usage as Envoy reports it. */
export function usage(bucket: Record<string, string>, allowed: number, denied = 0): BucketUsage {
  return { bucket_id: { bucket }, num_requests_allowed: allowed, num_requests_denied: denied };
}

/** A bucket id as text: `k=v,k=v`, keys sorted (the descriptor sluice matches it as). */
export function bucketText(bucket: Record<string, string>): string {
  return Object.keys(bucket)
    .sort()
    .map((k) => `${k}=${bucket[k]}`)
    .join(",");
}

/** What an action says: "ALLOW_ALL", "DENY_ALL", "tb <max_tokens>" or "abandon". */
export function said(a: Action): string {
  if (a.abandon_action) return "abandon";
  const s = a.quota_assignment_action?.rate_limit_strategy;
  if (s?.token_bucket) return `tb ${s.token_bucket.max_tokens}`;
  return s?.blanket_rule === 1 ? "DENY_ALL" : "ALLOW_ALL"; // BlanketRule: ALLOW_ALL 0, DENY_ALL 1
}

/** `ownConnection`: this client shares no connection with another (grpc-js shares them by default). */
export function rlqsClient(port: number, opts: { ownConnection?: boolean } = {}): RlqsClient {
  const client = new Rlqs(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), opts.ownConnection ? { "grpc.use_local_subchannel_pool": 1 } : {});
  return {
    open() {
      const call = client.StreamRateLimitQuotas();
      const state = { seen: {} as Record<string, string[]>, answers: 0, ended: undefined as string | undefined };
      call.on("data", (res: { bucket_action: Action[] }) => {
        state.answers++;
        for (const a of res.bucket_action) (state.seen[bucketText(a.bucket_id.bucket)] ??= []).push(said(a));
      });
      call.on("error", (err: Error) => {
        state.ended = err.message;
      });
      return {
        get seen() {
          return state.seen;
        },
        get answers() {
          return state.answers;
        },
        get ended() {
          return state.ended;
        },
        report: (domain, usages) => call.write({ domain, bucket_quota_usages: usages }),
        end: () => call.end(),
      };
    },
    close: () => client.close(),
  };
}
