// gRPC status codes, their metric names, and the wire form of a status (grpc/grpc doc/statuscodes.md,
// doc/PROTOCOL-HTTP2.md): trailers-only answers and percent-encoded grpc-message.
import { ACCEPT_ENCODING, encodeGrpcMessage, GRPC_STATUS } from "./refusals.js";

/** snake_case names for CallObserver.failed (the metrics label). */
export const STATUS_NAMES: Record<number, string> = {
  [GRPC_STATUS.CANCELLED]: "cancelled",
  [GRPC_STATUS.UNKNOWN]: "unknown",
  [GRPC_STATUS.INVALID_ARGUMENT]: "invalid_argument",
  [GRPC_STATUS.DEADLINE_EXCEEDED]: "deadline_exceeded",
  [GRPC_STATUS.NOT_FOUND]: "not_found",
  [GRPC_STATUS.RESOURCE_EXHAUSTED]: "resource_exhausted",
  [GRPC_STATUS.UNIMPLEMENTED]: "unimplemented",
  [GRPC_STATUS.INTERNAL]: "internal",
  [GRPC_STATUS.UNAVAILABLE]: "unavailable",
};

/** Media type of every answer; sluice speaks protobuf only. */
export const CONTENT_TYPE = "application/grpc";
/** Longest grpc-message sent: a status message echoes client input (a path, a header) at most this long. */
const MAX_MESSAGE_CHARS = 1024;

/** The one HEADERS frame of an error answer (HTTP 200, END_STREAM), as node's raw header list. */
export function trailersOnly(code: number, message: string): string[] {
  const text = message.length > MAX_MESSAGE_CHARS ? message.slice(0, MAX_MESSAGE_CHARS) + "..." : message;
  return [
    ":status",
    "200",
    "content-type",
    CONTENT_TYPE,
    "grpc-accept-encoding",
    ACCEPT_ENCODING,
    "grpc-status",
    String(code),
    "grpc-message",
    encodeGrpcMessage(text),
  ];
}
