// Decision -> one gRPC message (5-byte prefix + RateLimitResponse) in one exact-size buffer. What the
// answer says (its headers, refusal body, metadata Struct) is wire-response.ts's; this writes it as
// protobuf, the same bytes as proto-loader's serializer of toWireResponse(decision) (the reference codec
// of test/unit/h2-codec.test.ts): fields in number order, a field written whenever toWireResponse sets
// it, even when zero. Statuses are written straight from the decision, not through WireStatus objects.
import type { Limit } from "../../../rules/model.js";
import type { Decision, DescriptorDecision } from "../../../limiter/types.js";
import { CODE_WIRE, UNIT_WIRE } from "../wire-enums.js";
import { answerHeaders, dynamicMetadata, refusalBody, type WireStruct, type WireValue } from "../wire-response.js";

// Tags (field << 3 | wire type) of RateLimitResponse and DescriptorStatus; every field number is < 16.
const T_OVERALL_CODE = 0x08;
const T_STATUSES = 0x12;
const T_HEADERS_TO_ADD = 0x1a;
const T_RAW_BODY = 0x2a;
const T_STATUS_CODE = 0x08;
const T_LIMIT_REMAINING = 0x18;
const T_DURATION = 0x22;

/** Sizes of the statuses of the message being encoded (encoding is synchronous; reused, not per call). */
const statusSizes: number[] = [];

export function encodeResponseMessage(d: Decision): Buffer {
  const statuses = d.statuses;
  let size = 2; // overall_code
  for (let i = 0; i < statuses.length; i++) {
    const n = statusSize(statuses[i]);
    statusSizes[i] = n;
    size += 1 + varintSize(n) + n;
  }
  const headers = answerHeaders(d);
  const body = d.code === "OVER_LIMIT" ? refusalBody(d) : undefined;
  if (headers) for (let i = 0; i < headers.length; i++) size += headerFieldSize(headers[i].key, headers[i].value);
  if (body !== undefined) {
    const b = Buffer.byteLength(body);
    size += 1 + varintSize(b) + b;
  }
  const struct = dynamicMetadata(d);
  const metadata = struct ? lenField(6, structBytes(struct)) : undefined;
  if (metadata) size += metadata.length;

  const out = Buffer.allocUnsafe(5 + size);
  out[0] = 0; // not compressed
  out.writeUInt32BE(size, 1);
  let p = 5;
  out[p++] = T_OVERALL_CODE;
  out[p++] = CODE_WIRE[d.code];
  for (let i = 0; i < statuses.length; i++) {
    out[p++] = T_STATUSES;
    p = writeVarint(out, p, statusSizes[i]);
    p = writeStatus(out, p, statuses[i]);
  }
  if (headers) for (let i = 0; i < headers.length; i++) p = writeHeaderField(out, p, headers[i].key, headers[i].value);
  if (body !== undefined) {
    out[p++] = T_RAW_BODY;
    p = writeVarint(out, p, Buffer.byteLength(body));
    p += out.write(body, p, "utf8");
  }
  if (metadata) p += metadata.copy(out, p);
  if (p !== out.length) throw new Error(`RateLimitResponse encoder wrote ${p - 5} bytes, sized ${size}`);
  return out;
}

/** HeaderValue {key = 1, value = 2} as response_headers_to_add (field 3), tag and length included. */
function headerFieldSize(key: string, value: string): number {
  const k = Buffer.byteLength(key);
  const v = Buffer.byteLength(value);
  const n = 1 + varintSize(k) + k + 1 + varintSize(v) + v;
  return 1 + varintSize(n) + n;
}

function writeHeaderField(out: Buffer, p: number, key: string, value: string): number {
  const k = Buffer.byteLength(key);
  const v = Buffer.byteLength(value);
  out[p++] = T_HEADERS_TO_ADD;
  p = writeVarint(out, p, 1 + varintSize(k) + k + 1 + varintSize(v) + v);
  out[p++] = 0x0a; // HeaderValue.key
  p = writeVarint(out, p, k);
  p += out.write(key, p, "utf8");
  out[p++] = 0x12; // HeaderValue.value
  p = writeVarint(out, p, v);
  p += out.write(value, p, "utf8");
  return p;
}

function statusSize(s: DescriptorDecision): number {
  let n = 2 + 1 + varintSize(s.remaining >>> 0); // code, limit_remaining
  if (s.limit && !s.limit.unlimited) n += currentLimitField(s.limit).length;
  if (s.resetSeconds !== undefined) {
    const inner = durationSize(s.resetSeconds);
    n += 1 + varintSize(inner) + inner;
  }
  return n;
}

function writeStatus(out: Buffer, p: number, s: DescriptorDecision): number {
  out[p++] = T_STATUS_CODE;
  out[p++] = CODE_WIRE[s.code];
  if (s.limit && !s.limit.unlimited) p += currentLimitField(s.limit).copy(out, p);
  out[p++] = T_LIMIT_REMAINING;
  p = writeVarint(out, p, s.remaining >>> 0);
  if (s.resetSeconds !== undefined) {
    out[p++] = T_DURATION;
    p = writeVarint(out, p, durationSize(s.resetSeconds));
    out[p++] = 0x08; // Duration.seconds
    p = writeInt64(out, p, s.resetSeconds);
    out[p++] = 0x10; // Duration.nanos, always 0
    out[p++] = 0;
  }
  return p;
}

/** google.protobuf.Duration {seconds, nanos: 0}. */
function durationSize(seconds: number): number {
  return 1 + int64Size(seconds) + 2;
}

// ---- current_limit: fixed for a loaded limit, encoded once ------------------------------------------

const currentLimits = new WeakMap<Limit, Buffer>();

/** DescriptorStatus.current_limit (field 2) with its tag and length: {requests_per_unit, unit, name}. */
function currentLimitField(limit: Limit): Buffer {
  let b = currentLimits.get(limit);
  if (!b) {
    const parts: Buffer[] = [varintField(1, limit.requestsPerUnit >>> 0)];
    const unit = UNIT_WIRE[limit.unit];
    if (unit !== undefined) parts.push(int32Field(2, unit));
    if (limit.name != null) parts.push(lenField(3, Buffer.from(String(limit.name), "utf8")));
    b = lenField(2, Buffer.concat(parts));
    currentLimits.set(limit, b);
  }
  return b;
}

// ---- google.protobuf.Struct / Value (wire-response.ts's object form) as bytes ---------------------------

/** One Struct.fields map entry: {key = 1, value = 2}. */
function structEntry(key: string, value: Buffer): Buffer {
  return lenField(1, Buffer.concat([lenField(1, Buffer.from(key, "utf8")), lenField(2, value)]));
}

function structBytes(struct: WireStruct): Buffer {
  const entries: Buffer[] = [];
  for (const [k, v] of Object.entries(struct.fields)) entries.push(structEntry(k, valueBytes(v)));
  return Buffer.concat(entries);
}

const NULL_VALUE: WireValue = { nullValue: 0 };

function valueBytes(v: WireValue): Buffer {
  if ("nullValue" in v) return Buffer.from([0x08, 0x00]);
  if ("numberValue" in v) {
    const b = Buffer.allocUnsafe(9);
    b[0] = 0x11; // Value.number_value, fixed64
    b.writeDoubleLE(v.numberValue, 1);
    return b;
  }
  if ("stringValue" in v) return lenField(3, Buffer.from(v.stringValue, "utf8"));
  if ("boolValue" in v) return Buffer.from([0x20, v.boolValue ? 1 : 0]);
  if ("structValue" in v) return lenField(5, structBytes(v.structValue));
  const items: Buffer[] = [];
  // A hole of a sparse array (YAML never makes one) as null.
  for (const item of v.listValue.values) items.push(lenField(1, valueBytes(item ?? NULL_VALUE)));
  return lenField(6, Buffer.concat(items));
}

// ---- protobuf primitives ------------------------------------------------------------------------------

function varintSize(n: number): number {
  if (n < 0x80) return 1;
  if (n < 0x4000) return 2;
  if (n < 0x200000) return 3;
  if (n < 0x10000000) return 4;
  let size = 5;
  for (let v = Math.floor(n / 0x800000000); v > 0; v = Math.floor(v / 128)) size++;
  return size;
}

/** A non-negative integer up to 2^53 as a varint at p; returns the next position. */
function writeVarint(out: Buffer, p: number, n: number): number {
  while (n >= 0x80) {
    out[p++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  out[p++] = n;
  return p;
}

/** int64 from a JS number as protobufjs's Long.fromValue: truncated, NaN 0, clamped to the int64 range. */
function int64Of(n: number): bigint {
  if (Number.isNaN(n)) return 0n;
  if (n <= -(2 ** 63)) return -(2n ** 63n);
  if (n + 1 >= 2 ** 63) return 2n ** 63n - 1n;
  return BigInt(Math.trunc(n));
}

const isPlainVarint = (n: number) => Number.isInteger(n) && n >= 0 && n <= Number.MAX_SAFE_INTEGER;

function int64Size(n: number): number {
  if (isPlainVarint(n)) return varintSize(n);
  let v = BigInt.asUintN(64, int64Of(n));
  let size = 1;
  for (; v >= 0x80n; v >>= 7n) size++;
  return size;
}

function writeInt64(out: Buffer, p: number, n: number): number {
  if (isPlainVarint(n)) return writeVarint(out, p, n);
  let v = BigInt.asUintN(64, int64Of(n));
  for (; v >= 0x80n; v >>= 7n) out[p++] = Number(v & 0x7fn) | 0x80;
  out[p++] = Number(v);
  return p;
}

function varintBytes(n: number | bigint): Buffer {
  const bytes: number[] = [];
  let v = BigInt(n);
  for (; v >= 0x80n; v >>= 7n) bytes.push(Number(v & 0x7fn) | 0x80);
  bytes.push(Number(v));
  return Buffer.from(bytes);
}

function varintField(field: number, n: number): Buffer {
  return Buffer.concat([varintBytes(field << 3), varintBytes(n)]);
}

/** int32 / enum: a negative value is sign-extended to 10 bytes. */
function int32Field(field: number, n: number): Buffer {
  return Buffer.concat([varintBytes(field << 3), varintBytes(BigInt.asUintN(64, BigInt(n | 0)))]);
}

function lenField(field: number, payload: Buffer): Buffer {
  return Buffer.concat([varintBytes((field << 3) | 2), varintBytes(payload.length), payload]);
}
