// grpc.health.v1 on the wire: which service a HealthCheckRequest names, and the HealthCheckResponse
// messages (each a ready gRPC frame: there are only four). Known services (grpc-contract.ts): the service "" and the
// rate-limit service (and the reference's "ratelimit") are known; any other is NOT_FOUND for Check and SERVICE_UNKNOWN for Watch.
import { isHealthService } from "../grpc-contract.js";
import type { Fault } from "./framing.js";
import { GRPC_STATUS } from "./refusals.js";

export const HEALTH = { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } as const;

/** A HealthCheckResponse {status} as a gRPC message (prefix included), per status. */
export const HEALTH_FRAMES: readonly Buffer[] = [0, 1, 2, 3].map((status) => Buffer.from([0, 0, 0, 0, 2, 0x08, status]));

/** The service a HealthCheckRequest names (its `service`, field 1: the last one wins), or why the bytes are not one. */
export function requestedService(message: Buffer): string | Fault {
  let pos = 0;
  let start = 0;
  let end = 0;
  const n = message.length;
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10 && pos < n; i++) {
      const byte = message[pos++];
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    return -1;
  };
  while (pos < n) {
    const tag = varint();
    if (tag < 0) return malformed("truncated or overlong varint");
    const field = Math.floor(tag / 8);
    const wireType = tag & 7;
    if (field === 0 || field > 0x1fffffff) return malformed(`invalid field number ${field}`);
    if (field === 1 && wireType !== 2) return malformed(`service has wire type ${wireType}, expected 2`);
    if (wireType === 0) {
      if (varint() < 0) return malformed("truncated or overlong varint");
    } else if (wireType === 1 || wireType === 5) {
      pos += wireType === 1 ? 8 : 4;
      if (pos > n) return malformed("field runs past the end of the message");
    } else if (wireType === 2) {
      const len = varint();
      if (len < 0) return malformed("truncated or overlong varint");
      if (len > n - pos) return malformed("field runs past the end of the message");
      if (field === 1) {
        start = pos;
        end = pos + len;
      }
      pos += len;
    } else {
      return malformed(`wire type ${wireType} (groups and unknown types are not accepted)`);
    }
  }
  return message.toString("utf8", start, end);
}

export const isKnownService = isHealthService;

function malformed(why: string): Fault {
  return { code: GRPC_STATUS.INVALID_ARGUMENT, message: `malformed health check request: ${why}` };
}
