// A RateLimitService that records what it is asked: a real grpc-js server in the test process, put where
// sluice would be (e.g. in Envoy's "sluice" cluster) to see exactly what a caller sends. It answers OK with
// no statuses unless `answer` says otherwise, and serves grpc.health.v1 Check as SERVING (Envoy's health check).
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { LOADER_OPTIONS, OK, type WireRequest, type WireResponse } from "./grpc-client.js";

const def = protoLoader.loadSync(["envoy/service/ratelimit/v3/rls.proto", "grpc/health/v1/health.proto"], LOADER_OPTIONS);
const pkg = grpc.loadPackageDefinition(def) as any;

export interface RecordedCall {
  request: WireRequest;
  /** The call's metadata (request headers), as grpc-js gives them. */
  metadata: Record<string, unknown>;
}

export interface RecordingRls {
  port: number;
  /** Every ShouldRateLimit request, in arrival order (as proto-loader decodes it: absent fields absent). */
  calls: WireRequest[];
  /** The same calls with their metadata. */
  recorded: RecordedCall[];
  /** The answer to each call (default: OK, no statuses). An exception fails the call with INTERNAL. */
  answer?: (req: WireRequest) => WireResponse | Promise<WireResponse>;
  close(): Promise<void>;
}

/** Starts the server on 127.0.0.1 at `port` (default: a free one). */
export async function startRecordingRls(port = 0): Promise<RecordingRls> {
  const server = new grpc.Server();
  const rls: RecordingRls = {
    port: 0,
    calls: [],
    recorded: [],
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        // Streams Envoy keeps open must not hold the test: force after a short grace.
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1000).unref();
      }),
  };
  server.addService(pkg.envoy.service.ratelimit.v3.RateLimitService.service, {
    ShouldRateLimit(call: grpc.ServerUnaryCall<WireRequest, WireResponse>, callback: grpc.sendUnaryData<WireResponse>) {
      rls.calls.push(call.request);
      rls.recorded.push({ request: call.request, metadata: call.metadata.getMap() });
      Promise.resolve()
        .then(() => (rls.answer ? rls.answer(call.request) : { overall_code: OK, statuses: [] }))
        .then(
          (res) => callback(null, res),
          (err: Error) => callback({ code: grpc.status.INTERNAL, details: err.message }),
        );
    },
  });
  server.addService(pkg.grpc.health.v1.Health.service, {
    Check(_call: unknown, callback: grpc.sendUnaryData<{ status: number }>) {
      callback(null, { status: 1 }); // SERVING
    },
  });
  rls.port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  return rls;
}
