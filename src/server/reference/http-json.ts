// POST /json, the reference's HTTP way to ask ShouldRateLimit (its HTTP port): a RateLimitRequest in
// protobuf JSON in, the RateLimitResponse in protobuf JSON out; 200 for OK, 429 for OVER_LIMIT, 400
// for a body that is not a valid request. Decoding and bounds are the gRPC path's (decode.ts).
import type { Logger } from "pino";
import type { Limiter } from "../../limiter/limiter.js";
import { toWireResponse } from "../grpc/wire-response.js";
import { InvalidRequestError } from "../../limiter/types.js";
import { StoreUnavailableError } from "../../store/store.js";
import type { AdminResponse, BodyRoute } from "../admin/admin.js";
import { decodeRequest, type RequestBounds, type WireRequest } from "../grpc/decode.js";
import { fromProtoJson, ProtoJsonError, rlsJsonTypes, toProtoJson } from "./http-protojson.js";
import type { CallObserver } from "../grpc/grpc-contract.js";

interface JsonRouteOptions {
  limiter: Limiter;
  bounds: RequestBounds;
  /** Largest body read (SLUICE_MAX_MESSAGE_BYTES); larger gets 413. */
  maxBodyBytes: number;
  /** Metrics hear of /json calls as of gRPC ones. */
  observer?: CallObserver;
  logger: Logger;
}

const JSON_TYPE = "application/json";

export function jsonRoute(o: JsonRouteOptions): BodyRoute {
  const badRequest = (message: string, started: number): AdminResponse => {
    o.observer?.failed("invalid_argument", (performance.now() - started) / 1000);
    return { status: 400, body: `Bad Request: ${message}\n` };
  };
  return {
    method: "POST",
    maxBodyBytes: o.maxBodyBytes,
    async handle(body) {
      const started = performance.now();
      const { request, response } = rlsJsonTypes(); // loaded at the first call (memory of a process that serves none)
      let req;
      try {
        const json: unknown = JSON.parse(body.toString("utf8"));
        // The count bound before any conversion: a 1 MiB body can list 100,000 empty descriptors.
        const descriptors = (json as { descriptors?: unknown } | null)?.descriptors;
        if (Array.isArray(descriptors) && descriptors.length > o.bounds.maxDescriptors) {
          throw new InvalidRequestError(`request has ${descriptors.length} descriptors, more than the maximum ${o.bounds.maxDescriptors}`);
        }
        req = decodeRequest(fromProtoJson(request, json) as WireRequest, o.bounds);
      } catch (err) {
        if (err instanceof SyntaxError) return badRequest(`body is not JSON: ${err.message}`, started);
        if (err instanceof ProtoJsonError || err instanceof InvalidRequestError) return badRequest(err.message, started);
        throw err;
      }
      let decision;
      try {
        decision = await o.limiter.shouldRateLimit(req);
      } catch (err) {
        if (err instanceof InvalidRequestError) return badRequest(err.message, started);
        if (err instanceof StoreUnavailableError) {
          o.observer?.failed("unavailable", (performance.now() - started) / 1000);
          return { status: 503, body: `Service Unavailable: rate-limit store unavailable: ${err.message}\n` };
        }
        throw err;
      }
      const text = JSON.stringify(toProtoJson(response, toWireResponse(decision) as unknown as Record<string, unknown>));
      o.observer?.decided(req, decision, (performance.now() - started) / 1000);
      return { status: decision.code === "OVER_LIMIT" ? 429 : 200, body: text, contentType: JSON_TYPE };
    },
  };
}
