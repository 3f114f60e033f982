// gRPC message framing of a unary request (PROTOCOL-HTTP2.md "Length-Prefixed-Message"): exactly one
// message, uncompressed, no larger than the cap, which is checked from the 5-byte prefix before a byte
// of the message is held. Also the grpc-timeout header.
import { refusal } from "./refusals.js";
import { GRPC_STATUS } from "./refusals.js";

export interface Fault {
  code: number;
  message: string;
}

const EMPTY = Buffer.alloc(0);

/**
 * The request body of one unary call, fed DATA chunks as they arrive. A message that arrives whole in
 * one chunk is a view of it (no copy); a split one is gathered and copied once at its end.
 */
export class UnaryBody {
  /** The complete message, once received. */
  message: Buffer | null = null;
  /** Bytes of an incomplete message held in `parts` (the transport's buffer budget counts them). */
  held = 0;
  /** Bytes after the complete message (counted, not held): fewer than a prefix are stray, a prefix is a second message. */
  private tail = 0;
  /** Prefix bytes seen (0..5), the flags byte and the big-endian length read so far. */
  private head = 0;
  private flags = 0;
  private length = 0;
  private parts: Buffer[] | null = null;

  /** Takes one chunk of the body; a fault ends the call (the rest of the body is not read). */
  take(chunk: Buffer, maxBytes: number): Fault | undefined {
    let off = 0;
    const n = chunk.length;
    while (off < n) {
      if (this.message !== null) {
        this.tail += n - off;
        return this.tail >= 5 ? SECOND_MESSAGE : undefined;
      }
      if (this.head < 5) {
        if (this.head === 0 && n - off >= 5) {
          this.flags = chunk[off];
          this.length = chunk.readUInt32BE(off + 1);
          this.head = 5;
          off += 5;
        } else {
          const byte = chunk[off++];
          if (this.head === 0) this.flags = byte;
          else this.length = this.length * 256 + byte;
          if (++this.head < 5) continue;
        }
        const fault = this.checkPrefix(maxBytes);
        if (fault) return fault;
        if (this.length === 0) this.message = EMPTY;
        continue;
      }
      const need = this.length - this.held;
      const avail = n - off;
      if (this.parts === null && avail >= need) {
        this.message = chunk.subarray(off, off + need);
        off += need;
        continue;
      }
      const take = Math.min(avail, need);
      (this.parts ??= []).push(chunk.subarray(off, off + take));
      this.held += take;
      off += take;
      if (this.held === this.length) {
        this.message = Buffer.concat(this.parts, this.length);
        this.parts = null;
        this.held = 0;
      }
    }
    return undefined;
  }

  /** At the end of the request: the fault unless exactly one complete message came. */
  finish(): Fault | undefined {
    if (this.message !== null) {
      if (this.tail === 0) return undefined;
      return {
        code: GRPC_STATUS.UNIMPLEMENTED,
        message: `Received ${this.tail} stray byte${this.tail === 1 ? "" : "s"} after the request message (not a message: a prefix is 5 bytes)`,
      };
    }
    if (this.head === 0) return NO_MESSAGE;
    const detail = this.head < 5 ? `${this.head} of the 5 prefix bytes` : `${this.held} of its ${this.length} bytes`;
    return { code: GRPC_STATUS.UNIMPLEMENTED, message: `Received no request message: the body ended inside a message (${detail})` };
  }

  /** Drops what is held (the call is over). */
  release(): void {
    this.message = null;
    this.parts = null;
    this.held = 0;
  }

  private checkPrefix(maxBytes: number): Fault | undefined {
    if (this.flags !== 0) {
      if (this.flags === 1) return COMPRESSED;
      return { code: GRPC_STATUS.INTERNAL, message: `malformed message prefix: flags byte ${this.flags}, expected 0 or 1` };
    }
    if (this.length > maxBytes) {
      return { code: GRPC_STATUS.RESOURCE_EXHAUSTED, message: refusal.tooLarge(this.length, maxBytes) };
    }
    return undefined;
  }
}

// Request cardinality violations are UNIMPLEMENTED (doc/statuscodes.md).
const NO_MESSAGE: Fault = { code: GRPC_STATUS.UNIMPLEMENTED, message: "Received no request message" };
const SECOND_MESSAGE: Fault = { code: GRPC_STATUS.UNIMPLEMENTED, message: "Received a second request message for a unary call" };
// compression.md test case 6: the flag without a grpc-encoding other than identity is INTERNAL.
const COMPRESSED: Fault = {
  code: GRPC_STATUS.INTERNAL,
  message: refusal.compressedWithoutEncoding,
};

const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

/**
 * grpc-timeout ("TimeoutValue TimeoutUnit": 1 to 8 digits, then H M S m u n) in milliseconds;
 * NaN when the value is not of that form.
 */
export function parseTimeout(value: string): number {
  const n = value.length;
  if (n < 2 || n > 9) return NaN;
  const unit = UNIT_MS[value[n - 1]];
  if (unit === undefined) return NaN;
  let digits = 0;
  for (let i = 0; i < n - 1; i++) {
    const c = value.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return NaN;
    digits = digits * 10 + c;
  }
  return digits * unit;
}
