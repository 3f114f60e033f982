// Pre-encoded gRPC requests for the load generators: a hand-written protobuf writer for
// envoy.service.ratelimit.v3.RateLimitRequest (field numbers from rls.proto), framed with gRPC's
// 5-byte header. Client ids are written with a fixed width so one template can be patched per request.

/** Field numbers: RateLimitRequest.domain=1, .descriptors=2; RateLimitDescriptor.entries=1; Entry.key=1, .value=2. */
function varint(n) {
  const out = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

function lengthDelimited(field, payload) {
  return Buffer.concat([varint((field << 3) | 2), varint(payload.length), payload]);
}

function entry(key, value) {
  return lengthDelimited(1, Buffer.concat([lengthDelimited(1, Buffer.from(key)), lengthDelimited(2, Buffer.from(value))]));
}

/** descriptors: array of arrays of [key, value]. */
export function encodeRequest(domain, descriptors) {
  const parts = [lengthDelimited(1, Buffer.from(domain))];
  for (const d of descriptors) parts.push(lengthDelimited(2, Buffer.concat(d.map(([k, v]) => entry(k, v)))));
  return Buffer.concat(parts);
}

export function grpcFrame(message) {
  const header = Buffer.alloc(5);
  header.writeUInt8(0, 0); // not compressed
  header.writeUInt32BE(message.length, 1);
  return Buffer.concat([header, message]);
}

export const ID_WIDTH = 7; // up to 10,000,000 distinct clients

export function clientId(n) {
  return String(n).padStart(ID_WIDTH, "0");
}

/**
 * A framed request whose client id can be rewritten in place: `descriptorsFor(id)` must put the id
 * (ID_WIDTH digits) into the values; the template is built twice to find where the id bytes are.
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
    /** A fresh framed request for client n (0 <= n < 10^ID_WIDTH). */
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
