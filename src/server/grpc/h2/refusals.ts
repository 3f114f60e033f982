// The calls the gRPC server refuses before its handler runs, with the words it uses
// (test/conformance/ checks them exactly), and grpc-message's percent-encoding.

/** grpc status codes used by the transports. */
export const GRPC_STATUS = {
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

/** What the transports accept in grpc-encoding (and say so in grpc-accept-encoding). */
export const ACCEPT_ENCODING = "identity";

/** Echoed client text is cut to this many characters: a refusal must not mirror a 16 KiB header. */
const ECHO_MAX = 128;
const echo = (s: string) => (s.length > ECHO_MAX ? `${s.slice(0, ECHO_MAX)}...` : s);

export const refusal = {
  /** UNIMPLEMENTED: a path no service here serves. */
  unknownMethod: (path: string) => `unknown method ${echo(path)}`,
  /** UNIMPLEMENTED (grpc compression.md): messages compressed with an encoding not accepted here. */
  unsupportedEncoding: (encoding: string) => `grpc-encoding ${echo(encoding)} is not supported (this server accepts ${ACCEPT_ENCODING} only)`,
  /** INTERNAL (grpc compression.md, test case 6): the compressed flag set while grpc-encoding is identity. */
  compressedWithoutEncoding: `Received a compressed message, but the call's grpc-encoding is ${ACCEPT_ENCODING} (this server accepts ${ACCEPT_ENCODING} only)`,
  /** RESOURCE_EXHAUSTED, from the length prefix (grpc-js's words, which gRPC users know). */
  tooLarge: (size: number, max: number) => `Received message larger than max (${size} vs ${max})`,
  /** DEADLINE_EXCEEDED when grpc-timeout passes (grpc-js's words). */
  deadlineExceeded: "Deadline exceeded",
  /** NOT_FOUND from grpc.health.v1 Check. */
  unknownHealthService: (service: string) => `unknown service ${echo(service)}`,
};

/**
 * grpc-message value (PROTOCOL-HTTP2.md): UTF-8 bytes outside 0x20-0x7E, and '%', as %XX.
 * Plain ASCII text (the usual case) is returned as it is.
 */
export function encodeGrpcMessage(text: string): string {
  let plain = true;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain) return text;
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    out += byte < 0x20 || byte > 0x7e || byte === 0x25 ? `%${byte.toString(16).toUpperCase().padStart(2, "0")}` : String.fromCharCode(byte);
  }
  return out;
}
