// A real gRPC client for sluice, on the same protos Envoy's wire format uses.
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { PROTO_DIR } from "../../src/core/proto-dir.js";

/** proto-loader's object form as the tests read it (and as test/unit/h2-codec.test.ts's reference codec uses it). */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: Number,
  defaults: false,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

const def = protoLoader.loadSync(["envoy/service/ratelimit/v3/rls.proto", "grpc/health/v1/health.proto"], LOADER_OPTIONS);
const pkg = grpc.loadPackageDefinition(def) as any;

export interface WireEntry {
  key: string;
  value: string;
}
export interface WireDescriptor {
  entries: WireEntry[];
  limit?: { requests_per_unit: number; unit: number };
  hits_addend?: { value: number };
}
export interface WireRequest {
  domain: string;
  descriptors: WireDescriptor[];
  hits_addend?: number;
}
export interface WireStatus {
  code: string | number;
  current_limit?: { name?: string; requests_per_unit?: number; unit?: number };
  limit_remaining?: number;
  duration_until_reset?: { seconds?: number; nanos?: number };
}
export interface WireResponse {
  overall_code: number;
  statuses: WireStatus[];
  response_headers_to_add?: { key: string; value: string }[];
  raw_body?: Buffer;
  dynamic_metadata?: unknown;
}

export const OK = 1;
export const OVER_LIMIT = 2;

export interface RlsClient {
  /** metadata: request headers to send, e.g. a traceparent; a list sends the key once per value. */
  shouldRateLimit(req: WireRequest, deadlineMs?: number, metadata?: Record<string, string | string[]>): Promise<WireResponse>;
  health(service?: string): Promise<number>;
  /** grpc.health.v1 Watch: every status the server sends, in order; resolves when the stream ends. */
  watchHealth(service: string, onStatus: (status: number) => void): Promise<void>;
  close(): void;
}

export function rlsClient(port: number, credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure()): RlsClient {
  const address = `127.0.0.1:${port}`;
  const rls = new pkg.envoy.service.ratelimit.v3.RateLimitService(address, credentials);
  const health = new pkg.grpc.health.v1.Health(address, credentials);
  return {
    shouldRateLimit(req, deadlineMs = 10_000, metadata = {}) {
      const md = new grpc.Metadata();
      for (const [key, values] of Object.entries(metadata)) for (const v of [values].flat()) md.add(key, v);
      return new Promise((resolve, reject) =>
        rls.ShouldRateLimit(req, md, { deadline: Date.now() + deadlineMs }, (err: Error | null, res: WireResponse) => (err ? reject(err) : resolve(res))),
      );
    },
    health(service = "") {
      return new Promise((resolve, reject) =>
        health.Check({ service }, (err: Error | null, res: { status: number }) => (err ? reject(err) : resolve(res.status))),
      );
    },
    watchHealth(service, onStatus) {
      const call = health.Watch({ service });
      call.on("data", (m: { status: number }) => onStatus(m.status));
      return new Promise<void>((resolve) => {
        call.on("end", () => resolve());
        call.on("error", () => resolve());
      });
    },
    close() {
      rls.close();
      health.close();
    },
  };
}

export function retryAfter(res: WireResponse): string | undefined {
  return res.response_headers_to_add?.find((h) => h.key.toLowerCase() === "retry-after")?.value;
}

export function descriptor(entries: Record<string, string> | [string, string][], extra: Partial<WireDescriptor> = {}): WireDescriptor {
  const list = Array.isArray(entries) ? entries : Object.entries(entries);
  return { entries: list.map(([key, value]) => ({ key, value })), ...extra };
}
