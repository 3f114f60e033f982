// The gRPC transport: RateLimitService and grpc.health.v1. Decode, bound-check, map errors; no logic.
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { Limiter } from "../limiter/limiter.js";
import { toWireResponse, type WireResponse } from "../limiter/response.js";
import { InvalidRequestError, type Decision, type RateLimitRequest } from "../limiter/types.js";
import { StoreUnavailableError } from "../store/store.js";
import { decodeRequest, type RequestBounds, type WireRequest } from "./decode.js";
import { loadProtos } from "./protos.js";
import { checkRequestWire, RejectedRequest } from "./wire-guard.js";
import { RLS_SERVICE, type CallObserver, type RunningTransport, type TransportOptions } from "./transport.js";

export { RLS_SERVICE };
export type { CallObserver };
/** The grpc-js transport takes the common options (transport.ts). */
export type GrpcServerOptions = TransportOptions;

export interface RunningGrpcServer extends RunningTransport {
  server: grpc.Server;
}

const HEALTH = { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2 } as const;

export async function startGrpcServer(limiter: Limiter, o: TransportOptions): Promise<RunningGrpcServer> {
  const protos = loadProtos();
  const server = new grpc.Server({
    "grpc.max_receive_message_length": o.maxMessageBytes,
    "grpc.max_send_message_length": o.maxMessageBytes,
    "grpc.max_concurrent_streams": o.maxConcurrentStreams ?? 1000,
  });
  let serving = false;
  const watchers = new Set<grpc.ServerWritableStream<unknown, unknown>>();

  // One async function per call, no closures made per call; it settles only by answering.
  const unexpected = (err: unknown) => o.logger.error({ err }, "ShouldRateLimit failed after answering");
  server.addService(guardDecoding(protos.rls, o.bounds), {
    ShouldRateLimit(call: grpc.ServerUnaryCall<WireRequest | RejectedRequest, unknown>, callback: grpc.sendUnaryData<unknown>) {
      answer(limiter, o, call.request, callback).catch(unexpected);
    },
  });

  const healthStatus = (service: string): number | undefined =>
    service === "" || service === RLS_SERVICE ? (serving ? HEALTH.SERVING : HEALTH.NOT_SERVING) : undefined;

  server.addService(protos.health, {
    Check(call: grpc.ServerUnaryCall<{ service?: string }, unknown>, callback: grpc.sendUnaryData<unknown>) {
      const status = healthStatus(call.request.service ?? "");
      if (status === undefined) callback({ code: grpc.status.NOT_FOUND, details: "unknown service" });
      else callback(null, { status });
    },
    Watch(call: grpc.ServerWritableStream<{ service?: string }, unknown>) {
      const status = healthStatus(call.request.service ?? "");
      call.write({ status: status ?? 3 /* SERVICE_UNKNOWN */ });
      watchers.add(call);
      call.on("cancelled", () => watchers.delete(call));
      call.on("close", () => watchers.delete(call));
    },
  });

  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${o.host}:${o.port}`, o.tls?.credentials ?? grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    );
  });

  return {
    port,
    server,
    setServing(value: boolean) {
      serving = value;
      for (const w of watchers) w.write({ status: value ? HEALTH.SERVING : HEALTH.NOT_SERVING });
    },
    shutdown(graceMs: number) {
      serving = false;
      // Health watchers hear NOT_SERVING, then their streams end so they do not hold the shutdown.
      for (const w of watchers) {
        w.write({ status: HEALTH.NOT_SERVING });
        w.end();
      }
      return new Promise<boolean>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve(false);
        }, graceMs);
        force.unref();
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve(true);
        });
      });
    },
  };
}

/** Decode, decide, answer; any error becomes its gRPC status. The observer hears of every call. */
async function answer(
  limiter: Limiter,
  o: TransportOptions,
  request: WireRequest | RejectedRequest,
  callback: grpc.sendUnaryData<unknown>,
): Promise<void> {
  const observer = o.observer;
  const started = observer ? performance.now() : 0;
  let req: RateLimitRequest;
  let decision: Decision;
  let response: WireResponse;
  try {
    if (request instanceof RejectedRequest) throw new InvalidRequestError(request.message);
    req = decodeRequest(request, o.bounds);
    decision = await limiter.shouldRateLimit(req);
    response = toWireResponse(decision);
  } catch (err) {
    const e = toGrpcError(err, o.logger);
    callback(e);
    observer?.failed(GRPC_CODE_NAMES[e.code!] ?? "unknown", (performance.now() - started) / 1000);
    return;
  }
  callback(null, response);
  observer?.decided(req, decision, (performance.now() - started) / 1000);
}

/**
 * Bad bytes become INVALID_ARGUMENT with a message instead of grpc-js's bare INTERNAL: the wire is
 * checked first (wire-guard.ts), and a decoder error is returned as a RejectedRequest, not thrown.
 * Messages over the size cap never get here: grpc-js refuses them from the length prefix, before
 * buffering, with RESOURCE_EXHAUSTED (README "Security").
 */
function guardDecoding(service: grpc.ServiceDefinition, bounds: RequestBounds): grpc.ServiceDefinition {
  const method = service.ShouldRateLimit;
  const decode = method.requestDeserialize;
  return {
    ...service,
    ShouldRateLimit: {
      ...method,
      requestDeserialize(buf: Buffer) {
        const refused = checkRequestWire(buf, bounds);
        if (refused) return new RejectedRequest(refused);
        try {
          return decode(buf);
        } catch (err) {
          return new RejectedRequest(`malformed request: ${(err as Error).message}`);
        }
      },
    },
  };
}

const GRPC_CODE_NAMES: Record<number, string> = {
  [grpc.status.INVALID_ARGUMENT]: "invalid_argument",
  [grpc.status.UNAVAILABLE]: "unavailable",
  [grpc.status.INTERNAL]: "internal",
};

function toGrpcError(err: unknown, logger: Logger): Partial<grpc.StatusObject> {
  if (err instanceof InvalidRequestError) return { code: grpc.status.INVALID_ARGUMENT, details: err.message };
  if (err instanceof StoreUnavailableError) {
    return { code: grpc.status.UNAVAILABLE, details: `rate-limit store unavailable: ${err.message}` };
  }
  logger.error({ err }, "ShouldRateLimit failed");
  return { code: grpc.status.INTERNAL, details: "internal error" };
}
