// Hand-built protobuf and gRPC frames, for tests that need bytes no well-behaved client would send.
export const VARINT = 0;
export const LEN = 2;

export function varint(n: number | bigint): Buffer {
  let v = BigInt(n);
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Buffer.from(out);
}

export function tag(field: number, wireType: number): Buffer {
  return varint(field * 8 + wireType);
}

export function lenField(field: number, payload: Buffer | string): Buffer {
  const b = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
  return Buffer.concat([tag(field, LEN), varint(b.length), b]);
}

export function varintField(field: number, n: number | bigint): Buffer {
  return Buffer.concat([tag(field, VARINT), varint(n)]);
}

/** RateLimitRequest bytes; values may be raw Buffers (e.g. invalid UTF-8). */
export function encodeRequest(domain: string | Buffer, descriptors: [string | Buffer, string | Buffer][][], extra: Buffer[] = []): Buffer {
  const parts = [lenField(1, domain)];
  for (const entries of descriptors) {
    const d = entries.map(([k, v]) => lenField(1, Buffer.concat([lenField(1, k), lenField(2, v)])));
    parts.push(lenField(2, Buffer.concat(d)));
  }
  return Buffer.concat([...parts, ...extra]);
}

/** A gRPC length-prefixed message; `length` overrides the prefix (to lie about the size). */
export function grpcFrame(message: Buffer, opts: { compressed?: boolean; length?: number } = {}): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(opts.compressed ? 1 : 0, 0);
  head.writeUInt32BE(opts.length ?? message.length, 1);
  return Buffer.concat([head, message]);
}

/** An unknown field (number 15) that pads a request to exactly `total` bytes. */
export function padTo(request: Buffer, total: number): Buffer {
  for (let payload = Math.max(0, total - request.length - 2); payload >= 0; payload--) {
    const pad = lenField(15, Buffer.alloc(payload, 0x61));
    if (request.length + pad.length === total) return Buffer.concat([request, pad]);
  }
  throw new Error(`cannot pad ${request.length} bytes to ${total}`);
}
