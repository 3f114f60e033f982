// A prototype of hand-written protobuf (de)serializers for ShouldRateLimit, measured by bench/codec.mjs
// against proto-loader's: the same objects in and the same bytes out (codec.mjs checks the bytes), about
// twice as fast per message, but (de)serialization is only 2-3 % of a call's CPU in sluice's profile, so
// sluice does not use it (see bench/README.md, "Measured and not kept"). Field numbers are those of protos/.
// Written in TypeScript for src/server/, kept here as plain JS.
// ---- decoding RateLimitRequest -------------------------------------------------------------------
const VARINT = 0,
  FIXED64 = 1,
  LEN = 2,
  FIXED32 = 5;
class Reader {
  buf;
  end;
  pos;
  constructor(buf, start, end) {
    this.buf = buf;
    this.end = end;
    this.pos = start;
  }

  /** A varint as a number: exact up to 2^53, the low bits wrap beyond as protobufjs's Long->Number does. */
  varint() {
    let result = 0;
    let shift = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new RangeError("truncated varint");
      const b = this.buf[this.pos++];
      result += (b & 0x7f) * shift;
      if (b < 0x80) return result;
      shift *= 128;
    }
    throw new RangeError("varint longer than 10 bytes");
  }

  /** uint32 / int32 fields read the low 32 bits of the varint, as protobufjs does. */
  uint32() {
    return this.low32() >>> 0;
  }
  int32() {
    return this.low32() | 0;
  }
  low32() {
    let result = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new RangeError("truncated varint");
      const b = this.buf[this.pos++];
      if (i < 5) result |= (b & 0x7f) << (7 * i);
      if (b < 0x80) return result;
    }
    throw new RangeError("varint longer than 10 bytes");
  }

  /** End offset of a length-delimited field starting here. */
  length() {
    const len = this.uint32();
    const end = this.pos + len;
    if (end > this.end) throw new RangeError(`length ${len} exceeds the message`);
    return end;
  }
  string() {
    const end = this.length();
    const start = this.pos;
    this.pos = end;
    // Short ASCII (the usual descriptor key or value) without a call into C++; anything else as UTF-8.
    if (end - start > 32) return this.buf.toString("utf8", start, end);
    let s = "";
    for (let i = start; i < end; i++) {
      const c = this.buf[i];
      if (c >= 0x80) return this.buf.toString("utf8", start, end);
      s += String.fromCharCode(c);
    }
    return s;
  }
  skip(wireType) {
    switch (wireType) {
      case VARINT:
        this.varint();
        return;
      case FIXED64:
        this.pos += 8;
        break;
      case LEN:
        this.pos = this.length();
        return;
      case FIXED32:
        this.pos += 4;
        break;
      default:
        throw new Error(`invalid wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new RangeError("truncated field");
  }
}

/** The wire type a known field must have; a mismatch is a malformed message. */
function expect(tag, wireType) {
  if ((tag & 7) !== wireType) throw new Error(`field ${tag >>> 3}: wire type ${tag & 7}, expected ${wireType}`);
}

export function decodeRateLimitRequest(buf) {
  const r = new Reader(buf, 0, buf.length);
  const out = {};
  while (r.pos < r.end) {
    const tag = r.uint32();
    switch (tag >>> 3) {
      case 1:
        expect(tag, LEN);
        out.domain = r.string();
        break;
      case 2: {
        expect(tag, LEN);
        const end = r.length();
        (out.descriptors ??= []).push(decodeDescriptor(new Reader(buf, r.pos, end)));
        r.pos = end;
        break;
      }
      case 3:
        expect(tag, VARINT);
        out.hits_addend = r.uint32();
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return out;
}

function decodeDescriptor(r) {
  const d = {};
  while (r.pos < r.end) {
    const tag = r.uint32();
    switch (tag >>> 3) {
      case 1: {
        expect(tag, LEN);
        const end = r.length();
        (d.entries ??= []).push(decodeEntry(new Reader(r.buf, r.pos, end)));
        r.pos = end;
        break;
      }
      case 2: {
        expect(tag, LEN);
        const end = r.length();
        d.limit = decodeOverride(new Reader(r.buf, r.pos, end));
        r.pos = end;
        break;
      }
      case 3: {
        expect(tag, LEN);
        const end = r.length();
        d.hits_addend = decodeUInt64Value(new Reader(r.buf, r.pos, end));
        r.pos = end;
        break;
      }
      default:
        r.skip(tag & 7);
    }
  }
  return d;
}

function decodeEntry(r) {
  const e = {};
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    if (field === 1 || field === 2) {
      expect(tag, LEN);
      if (field === 1) e.key = r.string();
      else e.value = r.string();
    } else r.skip(tag & 7);
  }
  return e;
}

function decodeOverride(r) {
  const o = {};
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    if (field === 1) {
      expect(tag, VARINT);
      o.requests_per_unit = r.uint32();
    } else if (field === 2) {
      expect(tag, VARINT);
      o.unit = r.int32();
    } else r.skip(tag & 7);
  }
  return o;
}

function decodeUInt64Value(r) {
  const v = {};
  while (r.pos < r.end) {
    const tag = r.uint32();
    if (tag >>> 3 === 1) {
      expect(tag, VARINT);
      v.value = r.varint();
    } else r.skip(tag & 7);
  }
  return v;
}

// ---- encoding RateLimitResponse ------------------------------------------------------------------
// Two passes: sizes first (nested lengths are prefixes), then one exact-size buffer. Like protobufjs
// after fromObject, a field is written when it is present (not null/undefined), even when it is zero.
function varintSize(n) {
  if (n < 0x80) return 1;
  if (n < 0x4000) return 2;
  if (n < 0x200000) return 3;
  if (n < 0x10000000) return 4;
  let size = 5;
  for (let v = Math.floor(n / 0x800000000); v > 0; v = Math.floor(v / 128)) size++;
  return size;
}

/** int32 and enum values: negative ones take 10 bytes (sign-extended to 64 bits), as in protobufjs. */
function int32Size(n) {
  return n < 0 ? 10 : varintSize(n);
}

/** int64 from a JS number, as protobufjs's Long.fromValue: truncated toward zero, NaN is 0. */
function int64Value(n) {
  return Number.isFinite(n) ? BigInt(Math.trunc(n)) : 0n;
}

function int64Size(n) {
  const v = int64Value(n);
  if (v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER)) return varintSize(Number(v));
  return varintBigSize(BigInt.asUintN(64, v));
}

function varintBigSize(v) {
  let size = 1;
  while (v >= 0x80n) {
    v >>= 7n;
    size++;
  }
  return size;
}

class Writer {
  buf;
  pos = 0;
  constructor(buf) {
    this.buf = buf;
  }
  varint(n) {
    while (n >= 0x80) {
      this.buf[this.pos++] = (n % 128) | 0x80;
      n = Math.floor(n / 128);
    }
    this.buf[this.pos++] = n;
  }
  int32(n) {
    if (n >= 0) this.varint(n);
    else this.bigVarint(BigInt.asUintN(64, BigInt(n)));
  }
  int64(n) {
    const v = int64Value(n);
    if (v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER)) this.varint(Number(v));
    else this.bigVarint(BigInt.asUintN(64, v));
  }
  bigVarint(v) {
    while (v >= 0x80n) {
      this.buf[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
  }
  tag(field, wireType) {
    this.buf[this.pos++] = (field << 3) | wireType; // every field number here is below 16
  }
  string(s, byteLength) {
    this.varint(byteLength);
    this.pos += this.buf.write(s, this.pos, byteLength, "utf8");
  }
  bytes(b) {
    this.varint(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
  double(n) {
    this.buf.writeDoubleLE(n, this.pos);
    this.pos += 8;
  }
}

const has = (v) => v !== undefined && v !== null;
const u32 = (n) => n >>> 0;
const i32 = (n) => n | 0;
const lenField = (size) => 1 + varintSize(size) + size;
const strField = (s) => lenField(Buffer.byteLength(s, "utf8"));
function currentLimitSize(c) {
  let n = 0;
  if (has(c.requests_per_unit)) n += 1 + varintSize(u32(c.requests_per_unit));
  if (has(c.unit)) n += 1 + int32Size(i32(c.unit));
  if (has(c.name)) n += strField(String(c.name));
  return n;
}

function durationSize(d) {
  let n = 0;
  if (has(d.seconds)) n += 1 + int64Size(d.seconds);
  if (has(d.nanos)) n += 1 + int32Size(i32(d.nanos));
  return n;
}

function statusSize(s) {
  let n = 0;
  if (has(s.code)) n += 1 + int32Size(i32(s.code));
  if (has(s.current_limit)) n += lenField(currentLimitSize(s.current_limit));
  if (has(s.limit_remaining)) n += 1 + varintSize(u32(s.limit_remaining));
  if (has(s.duration_until_reset)) n += lenField(durationSize(s.duration_until_reset));
  return n;
}

function headerSize(h) {
  let n = 0;
  if (has(h.key)) n += strField(String(h.key));
  if (has(h.value)) n += strField(String(h.value));
  return n;
}

function structSize(s) {
  let n = 0;
  if (!has(s.fields)) return 0;
  for (const key of Object.keys(s.fields)) n += lenField(strField(key) + lenField(valueSize(s.fields[key])));
  return n;
}

function valueSize(v) {
  const o = v;
  let n = 0;
  if (has(o.nullValue)) n += 1 + int32Size(i32(o.nullValue));
  if (has(o.numberValue)) n += 9;
  if (has(o.stringValue)) n += strField(String(o.stringValue));
  if (has(o.boolValue)) n += 2;
  if (has(o.structValue)) n += lenField(structSize(o.structValue));
  if (has(o.listValue)) n += lenField(listSize(o.listValue));
  return n;
}

function listSize(l) {
  let n = 0;
  for (const v of l.values ?? []) n += lenField(valueSize(v));
  return n;
}

function writeCurrentLimit(w, c) {
  if (has(c.requests_per_unit)) {
    w.tag(1, VARINT);
    w.varint(u32(c.requests_per_unit));
  }
  if (has(c.unit)) {
    w.tag(2, VARINT);
    w.int32(i32(c.unit));
  }
  if (has(c.name)) writeString(w, 3, String(c.name));
}

function writeDuration(w, d) {
  if (has(d.seconds)) {
    w.tag(1, VARINT);
    w.int64(d.seconds);
  }
  if (has(d.nanos)) {
    w.tag(2, VARINT);
    w.int32(i32(d.nanos));
  }
}

function writeStatus(w, s) {
  if (has(s.code)) {
    w.tag(1, VARINT);
    w.int32(i32(s.code));
  }
  if (has(s.current_limit)) {
    w.tag(2, LEN);
    w.varint(currentLimitSize(s.current_limit));
    writeCurrentLimit(w, s.current_limit);
  }
  if (has(s.limit_remaining)) {
    w.tag(3, VARINT);
    w.varint(u32(s.limit_remaining));
  }
  if (has(s.duration_until_reset)) {
    w.tag(4, LEN);
    w.varint(durationSize(s.duration_until_reset));
    writeDuration(w, s.duration_until_reset);
  }
}

function writeString(w, field, s) {
  w.tag(field, LEN);
  w.string(s, Buffer.byteLength(s, "utf8"));
}

function writeHeader(w, h) {
  if (has(h.key)) writeString(w, 1, String(h.key));
  if (has(h.value)) writeString(w, 2, String(h.value));
}

function writeStruct(w, s) {
  if (!has(s.fields)) return;
  for (const key of Object.keys(s.fields)) {
    const value = s.fields[key];
    const valueLen = valueSize(value);
    w.tag(1, LEN);
    w.varint(strField(key) + lenField(valueLen));
    writeString(w, 1, key);
    w.tag(2, LEN);
    w.varint(valueLen);
    writeValue(w, value);
  }
}

function writeValue(w, v) {
  const o = v;
  if (has(o.nullValue)) {
    w.tag(1, VARINT);
    w.int32(i32(o.nullValue));
  }
  if (has(o.numberValue)) {
    w.tag(2, FIXED64);
    w.double(Number(o.numberValue));
  }
  if (has(o.stringValue)) writeString(w, 3, String(o.stringValue));
  if (has(o.boolValue)) {
    w.tag(4, VARINT);
    w.varint(o.boolValue ? 1 : 0);
  }
  if (has(o.structValue)) {
    w.tag(5, LEN);
    w.varint(structSize(o.structValue));
    writeStruct(w, o.structValue);
  }
  if (has(o.listValue)) {
    const l = o.listValue;
    w.tag(6, LEN);
    w.varint(listSize(l));
    for (const item of l.values ?? []) {
      w.tag(1, LEN);
      w.varint(valueSize(item));
      writeValue(w, item);
    }
  }
}

export function encodeRateLimitResponse(res) {
  const statuses = res.statuses ?? [];
  const headers = res.response_headers_to_add ?? [];
  let size = 0;
  if (has(res.overall_code)) size += 1 + int32Size(i32(res.overall_code));
  const statusSizes = new Array(statuses.length);
  for (let i = 0; i < statuses.length; i++) {
    statusSizes[i] = statusSize(statuses[i]);
    size += lenField(statusSizes[i]);
  }
  for (const h of headers) size += lenField(headerSize(h));
  if (has(res.raw_body)) size += lenField(res.raw_body.length);
  const metaSize = has(res.dynamic_metadata) ? structSize(res.dynamic_metadata) : 0;
  if (has(res.dynamic_metadata)) size += lenField(metaSize);
  const w = new Writer(Buffer.allocUnsafe(size));
  if (has(res.overall_code)) {
    w.tag(1, VARINT);
    w.int32(i32(res.overall_code));
  }
  for (let i = 0; i < statuses.length; i++) {
    w.tag(2, LEN);
    w.varint(statusSizes[i]);
    writeStatus(w, statuses[i]);
  }
  for (const h of headers) {
    w.tag(3, LEN);
    w.varint(headerSize(h));
    writeHeader(w, h);
  }
  if (has(res.raw_body)) {
    w.tag(5, LEN);
    w.bytes(res.raw_body);
  }
  if (has(res.dynamic_metadata)) {
    w.tag(6, LEN);
    w.varint(metaSize);
    writeStruct(w, res.dynamic_metadata);
  }
  if (w.pos !== size) throw new Error(`RateLimitResponse encoder wrote ${w.pos} bytes, sized ${size}`);
  return w.buf;
}

/** The RateLimitService definition with these (de)serializers in place of proto-loader's. */
export function withHandWrittenCodec(service) {
  const method = service.ShouldRateLimit;
  if (!method) throw new Error("not the RateLimitService definition: no ShouldRateLimit");
  return {
    ...service,
    ShouldRateLimit: {
      ...method,
      requestDeserialize: decodeRateLimitRequest,
      responseSerialize: encodeRateLimitResponse,
    },
  };
}
