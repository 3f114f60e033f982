// Decision -> one gRPC message (5-byte prefix + RateLimitResponse) in one exact-size buffer, without
// the intermediate WireResponse. Same bytes as proto-loader's serializer of toWireResponse(decision)
// (server/wire-response.ts; test/unit/h2-codec.test.ts compares them): fields in number order, a field
// written whenever toWireResponse sets it, even when zero.
import type { Limit } from "../../rules/model.js";
import type { Decision, DescriptorDecision } from "../../limiter/types.js";
import { CODE_WIRE, UNIT_WIRE } from "../wire-enums.js";

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
  // response_headers_to_add: refused, content-type then Retry-After then the decision's headers; else its headers.
  const over = d.code === "OVER_LIMIT";
  const headers = d.headers;
  let retryAfter: string | undefined;
  let body: string | undefined;
  if (over) {
    size += CONTENT_TYPE_JSON.length;
    body = refusalBody(d);
    if (d.retryAfterSeconds !== undefined) {
      retryAfter = String(d.retryAfterSeconds);
      size += headerFieldSize("Retry-After", retryAfter);
    }
  }
  if (headers) for (let i = 0; i < headers.length; i++) size += headerFieldSize(headers[i].key, headers[i].value);
  if (body !== undefined) {
    const b = Buffer.byteLength(body);
    size += 1 + varintSize(b) + b;
  }
  const metadata = d.metadata ? dynamicMetadataField(d.metadata) : d.dynamicMetadata ? lenField(6, structPayload(d.dynamicMetadata)) : undefined;
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
  if (over) {
    p += CONTENT_TYPE_JSON.copy(out, p);
    if (retryAfter !== undefined) p = writeHeaderField(out, p, "Retry-After", retryAfter);
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

// ---- the refusal: what wire-response.ts's refusal() adds to an OVER_LIMIT answer ------------------------

/** response_headers_to_add {content-type: application/json}: Envoy's 429 body is JSON. */
const CONTENT_TYPE_JSON = lenField(3, Buffer.concat([lenField(1, Buffer.from("content-type")), lenField(2, Buffer.from("application/json"))]));

function refusalBody(d: Decision): string {
  let body =
    d.quotaResetsAtMs !== undefined
      ? '{"error":"quota_exhausted","quota_resets_at":"' + new Date(d.quotaResetsAtMs).toISOString().slice(0, 19) + 'Z"'
      : '{"error":"rate_limited"';
  if (d.retryAfterSeconds !== undefined) body += ',"retry_after_seconds":' + d.retryAfterSeconds;
  return body + "}";
}

// ---- dynamic_metadata: {"descriptors":[{"index":i,"metadata":{...}}]} as a google.protobuf.Struct ---

/** A rule's metadata never changes while its rules are loaded: its Value bytes are made once. */
const metadataValues = new WeakMap<object, Buffer>();

function dynamicMetadataField(list: NonNullable<Decision["metadata"]>): Buffer {
  const values: Buffer[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const m = list[i];
    let metadata = metadataValues.get(m.metadata);
    if (!metadata) {
      metadata = valueBytes(m.metadata);
      metadataValues.set(m.metadata, metadata);
    }
    const item = Buffer.concat([structEntry("index", numberValue(m.index)), structEntry("metadata", metadata)]);
    values[i] = lenField(1, lenField(5, item)); // ListValue.values[i] = Value{struct_value}
  }
  const list_ = lenField(6, Buffer.concat(values)); // Value{list_value}
  return lenField(6, structEntry("descriptors", list_));
}

/** One Struct.fields map entry: {key = 1, value = 2}. */
function structEntry(key: string, value: Buffer): Buffer {
  return lenField(1, Buffer.concat([lenField(1, Buffer.from(key, "utf8")), lenField(2, value)]));
}

function numberValue(n: number): Buffer {
  const b = Buffer.allocUnsafe(9);
  b[0] = 0x11; // Value.number_value, fixed64
  b.writeDoubleLE(n, 1);
  return b;
}

/** google.protobuf.Value bytes of a JS value, with response.ts's toValue mapping. */
function valueBytes(v: unknown): Buffer {
  if (v === null || v === undefined) return Buffer.from([0x08, 0x00]); // null_value
  if (typeof v === "number") return numberValue(v);
  if (typeof v === "string") return lenField(3, Buffer.from(v, "utf8"));
  if (typeof v === "boolean") return Buffer.from([0x20, v ? 1 : 0]);
  if (Array.isArray(v)) {
    // A hole of a sparse array as null (YAML never makes one).
    const items: Buffer[] = [];
    for (let i = 0; i < v.length; i++) items.push(lenField(1, valueBytes(v[i])));
    return lenField(6, Buffer.concat(items));
  }
  if (v instanceof Date) return lenField(3, Buffer.from(v.toISOString(), "utf8"));
  if (typeof v === "object") return lenField(5, structPayload(v as Record<string, unknown>));
  return lenField(3, Buffer.from(String(v), "utf8"));
}

/** google.protobuf.Struct bytes of a plain object, as response.ts's toStruct. */
function structPayload(obj: Record<string, unknown>): Buffer {
  const entries: Buffer[] = [];
  for (const [k, value] of Object.entries(obj)) {
    // toStruct's `fields[k] = ...` sets the prototype for "__proto__": not a field on the wire.
    if (k === "__proto__") continue;
    entries.push(structEntry(k, valueBytes(value)));
  }
  return Buffer.concat(entries);
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
