// gRPC status codes, their metric names, and the wire form of a status (grpc/grpc doc/statuscodes.md,
// doc/PROTOCOL-HTTP2.md): trailers-only answers and percent-encoded grpc-message.

export const Status = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** snake_case names for CallObserver.failed (the metrics label). */
export const STATUS_NAMES: Record<number, string> = {
  [Status.CANCELLED]: "cancelled",
  [Status.UNKNOWN]: "unknown",
  [Status.INVALID_ARGUMENT]: "invalid_argument",
  [Status.DEADLINE_EXCEEDED]: "deadline_exceeded",
  [Status.NOT_FOUND]: "not_found",
  [Status.RESOURCE_EXHAUSTED]: "resource_exhausted",
  [Status.UNIMPLEMENTED]: "unimplemented",
  [Status.INTERNAL]: "internal",
  [Status.UNAVAILABLE]: "unavailable",
};

/** Media type of every answer; sluice speaks protobuf only. */
export const CONTENT_TYPE = "application/grpc";
/** Compression sluice accepts (none): sent with every answer so a client knows not to compress. */
export const ACCEPT_ENCODING = "identity";

const HEX = "0123456789ABCDEF";

/**
 * grpc-message: UTF-8 bytes outside 0x20-0x7E, and '%', as %XX (PROTOCOL-HTTP2.md "Status-Message").
 * The usual message is plain ASCII and returned as it is.
 */
export function percentEncode(message: string): string {
  let plain = true;
  for (let i = 0; i < message.length; i++) {
    const c = message.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain) return message;
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    if (byte < 0x20 || byte > 0x7e || byte === 0x25) out += "%" + HEX[byte >> 4] + HEX[byte & 15];
    else out += String.fromCharCode(byte);
  }
  return out;
}

/** Longest grpc-message sent: a status message echoes client input (a path, a header) at most this long. */
const MAX_MESSAGE_CHARS = 1024;

/** The one HEADERS frame of an error answer (HTTP 200, END_STREAM), as node's raw header list. */
export function trailersOnly(code: number, message: string): string[] {
  const text = message.length > MAX_MESSAGE_CHARS ? message.slice(0, MAX_MESSAGE_CHARS) + "..." : message;
  return [
    ":status", "200",
    "content-type", CONTENT_TYPE,
    "grpc-accept-encoding", ACCEPT_ENCODING,
    "grpc-status", String(code),
    "grpc-message", percentEncode(text),
  ];
}
