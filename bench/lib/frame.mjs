// @ts-check
// gRPC request bytes written by hand, for the load generators and for the tests (test/ imports this file; it
// imports nothing of test/ or dist/): a protobuf writer, envoy.service.ratelimit.v3.RateLimitRequest (field
// numbers from rls.proto), gRPC's 5-byte framing, and request templates whose client id is patched in place.
// Tests also write what no well-behaved client sends: raw Buffers as values, unknown fields, lying lengths.

export const RLS_PATH = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/** Protobuf wire types. */
export const VARINT = 0;
export const LEN = 2;

/** @param {number | bigint} n */
export function varint(n) {
  let v = BigInt(n);
  const out = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Buffer.from(out);
}

/** @param {number} field @param {number} wireType */
export function tag(field, wireType) {
  return varint(field * 8 + wireType);
}

/** A length-delimited field; a string is written as UTF-8. @param {number} field @param {Buffer | string} payload */
export function lenField(field, payload) {
  const b = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
  return Buffer.concat([tag(field, LEN), varint(b.length), b]);
}

/** @param {number} field @param {number | bigint} n */
export function varintField(field, n) {
  return Buffer.concat([tag(field, VARINT), varint(n)]);
}

/**
 * RateLimitRequest{domain=1, descriptors=2 [{entries=1 [{key=1, value=2}]}]}, then `extra` (more fields, as
 * bytes). Values may be raw Buffers (e.g. invalid UTF-8).
 * @param {string | Buffer} domain
 * @param {[string | Buffer, string | Buffer][][]} descriptors
 * @param {Buffer[]} [extra]
 */
export function encodeRequest(domain, descriptors, extra = []) {
  const parts = [lenField(1, domain)];
  for (const entries of descriptors) {
    const d = entries.map(([k, v]) => lenField(1, Buffer.concat([lenField(1, k), lenField(2, v)])));
    parts.push(lenField(2, Buffer.concat(d)));
  }
  return Buffer.concat([...parts, ...extra]);
}

/**
 * A gRPC length-prefixed message; `length` overrides the prefix (to lie about the size).
 * @param {Buffer} message
 * @param {{ compressed?: boolean, length?: number }} [opts]
 */
export function grpcFrame(message, opts = {}) {
  const head = Buffer.alloc(5);
  head.writeUInt8(opts.compressed ? 1 : 0, 0);
  head.writeUInt32BE(opts.length ?? message.length, 1);
  return Buffer.concat([head, message]);
}

/** An unknown field (number 15) that pads a request to exactly `total` bytes. @param {Buffer} request @param {number} total */
export function padTo(request, total) {
  for (let payload = Math.max(0, total - request.length - 2); payload >= 0; payload--) {
    const pad = lenField(15, Buffer.alloc(payload, 0x61));
    if (request.length + pad.length === total) return Buffer.concat([request, pad]);
  }
  throw new Error(`cannot pad ${request.length} bytes to ${total}`);
}

export const ID_WIDTH = 7; // up to 10,000,000 distinct clients

/** @param {number} n */
export function clientId(n) {
  return String(n).padStart(ID_WIDTH, "0");
}

/**
 * A framed request whose client id can be rewritten in place: `descriptorsFor(id)` must put the id
 * (ID_WIDTH digits) into the values; the template is built twice to find where the id bytes are.
 * @param {string} domain
 * @param {(id: string) => [string, string][][]} descriptorsFor
 */
export function requestTemplate(domain, descriptorsFor) {
  const a = grpcFrame(encodeRequest(domain, descriptorsFor("0".repeat(ID_WIDTH))));
  const b = grpcFrame(encodeRequest(domain, descriptorsFor("9".repeat(ID_WIDTH))));
  if (a.length !== b.length) throw new Error("client id changes the request length");
  const offsets = [];
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) offsets.push(i);
  if (offsets.length % ID_WIDTH !== 0) throw new Error("client id bytes not found in the template");
  const starts = offsets.filter((_, i) => i % ID_WIDTH === 0);
  return {
    buffer: a,
    /** A fresh framed request for client n (0 <= n < 10^ID_WIDTH). @param {number} n */
    forClient(n) {
      const out = Buffer.allocUnsafe(a.length);
      a.copy(out);
      for (const s of starts) {
        let x = n;
        for (let i = ID_WIDTH - 1; i >= 0; i--) {
          out[s + i] = 48 + (x % 10);
          x = (x / 10) | 0;
        }
      }
      return out;
    },
  };
}
