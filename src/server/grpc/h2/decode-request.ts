// RateLimitRequest bytes -> the limiter's RateLimitRequest in one pass. Precedence: a structural fault
// anywhere wins (the first in byte order: wrong wire type, truncation, a group), then the count bounds,
// then decode.ts's checks (requestFault, their one owner) in its order. Descriptors and entries past
// their bounds are walked, never built, so 500,000 empty descriptors cost a scan. test/unit/h2-codec.test.ts
// holds it to the grpc-js reference codec (test/helpers/wire-guard.ts, protobufjs, decode.ts).
//
// Values read as protobufjs reads them (the last of a repeated scalar or message field wins; uint32 is
// the low 32 bits; uint64 becomes a Number; strings are UTF-8 with U+FFFD for bad bytes). One
// difference: a uint32 varint of 6 to 10 bytes (never sent by a protobuf encoder) is read by its
// bytes here; protobufjs skips the 5 bytes after the fifth whatever they are.
import { InvalidRequestError, type DescriptorEntry, type DescriptorRequest, type RateLimitRequest } from "../../../limiter/types.js";
import type { Unit } from "../../../rules/model.js";
import { overrideUnit, requestFault, type RequestBounds } from "../decode.js";

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

// Paths in messages, as the structural faults name them.
const P_REQUEST = "request";
const P_DESCRIPTOR = "request.descriptors";
const P_ENTRY = "request.descriptors.entries";
const P_LIMIT = "request.descriptors.limit";
const P_HITS = "request.descriptors.hits_addend";

// Decoding is synchronous: the buffer and position live here instead of in a reader object per call.
let buf: Buffer = Buffer.alloc(0);
let pos = 0;

// Per-request state that the descriptor and entry readers update.
let bounds: RequestBounds;
/** Number of descriptor fields seen (built or not). */
let descriptorCount = 0;
/** The first descriptor with more than maxEntries entries. */
let overEntries: string | undefined;
/** The first fault of the first faulty descriptor (requestFault). */
let descriptorFault: string | undefined;

class Malformed extends Error {}

/** Decodes and bound-checks a request; throws InvalidRequestError naming the first fault. */
export function decodeRateLimitRequest(bytes: Buffer, b: RequestBounds): RateLimitRequest {
  buf = bytes;
  pos = 0;
  bounds = b;
  descriptorCount = 0;
  overEntries = undefined;
  descriptorFault = undefined;
  try {
    return readRequest(bytes.length);
  } catch (err) {
    if (err instanceof Malformed) throw new InvalidRequestError(err.message);
    throw err;
  } finally {
    buf = EMPTY; // do not keep the last request's bytes alive
  }
}

const EMPTY = Buffer.alloc(0);

function fault(message: string | undefined): void {
  if (message !== undefined) throw new InvalidRequestError(message);
}

function readRequest(end: number): RateLimitRequest {
  let domainStart = -1;
  let domainEnd = -1;
  let hitsAddend = 0;
  const descriptors: DescriptorRequest[] = [];
  while (pos < end) {
    const tag = readTag(end, P_REQUEST);
    const wireType = tag & 7;
    switch (tag >>> 3) {
      case 1:
        if (wireType !== LEN) wrongType(P_REQUEST, "domain", wireType, LEN);
        domainEnd = readLength(end, P_REQUEST);
        domainStart = pos;
        pos = domainEnd;
        break;
      case 2: {
        if (wireType !== LEN) wrongType(P_REQUEST, "descriptors", wireType, LEN);
        const dEnd = readLength(end, P_REQUEST);
        const index = descriptorCount++;
        // Build while the request can still pass; once it cannot, only walk (a later structural fault wins).
        const build = index < bounds.maxDescriptors && overEntries === undefined && descriptorFault === undefined;
        const d = readDescriptor(dEnd, index, build);
        if (d) descriptors.push(d);
        break;
      }
      case 3:
        if (wireType !== VARINT) wrongType(P_REQUEST, "hits_addend", wireType, VARINT);
        hitsAddend = readUint32(end, P_REQUEST);
        break;
      default:
        skipUnknown(wireType, end, P_REQUEST);
    }
  }

  // Structure is sound; now the counts (seen without building), then decode.ts's order.
  if (descriptorCount > bounds.maxDescriptors) fault(requestFault.descriptorCount(descriptorCount, bounds));
  if (overEntries !== undefined) fault(overEntries);
  const domain = domainStart < 0 ? "" : readString(domainStart, domainEnd);
  fault(requestFault.domain(domain, bounds));
  fault(requestFault.descriptorCount(descriptorCount, bounds));
  fault(descriptorFault);
  return { domain, descriptors, hitsAddend };
}

/** One descriptor up to `end`; null when only walked (past a bound, or a fault already found). */
function readDescriptor(end: number, index: number, build: boolean): DescriptorRequest | null {
  const entries: DescriptorEntry[] | null = build ? [] : null;
  let entryCount = 0;
  let entryFault: string | undefined;
  let hasLimit = false;
  let requestsPerUnit = 0;
  let unitNumber = 0;
  let hasHits = false;
  let hits = 0;
  while (pos < end) {
    const tag = readTag(end, P_DESCRIPTOR);
    const wireType = tag & 7;
    switch (tag >>> 3) {
      case 1: {
        if (wireType !== LEN) wrongType(P_DESCRIPTOR, "entries", wireType, LEN);
        const eEnd = readLength(end, P_DESCRIPTOR);
        const j = entryCount++;
        if (entries !== null && j < bounds.maxEntries) {
          const e = readEntry(eEnd, true);
          entryFault ??= requestFault.entry(index, j, e.key, e.value, bounds);
          entries.push(e);
        } else {
          readEntry(eEnd, false);
        }
        break;
      }
      case 2: {
        if (wireType !== LEN) wrongType(P_DESCRIPTOR, "limit", wireType, LEN);
        const lEnd = readLength(end, P_DESCRIPTOR);
        // A second limit replaces the first, as in protobufjs.
        hasLimit = true;
        requestsPerUnit = 0;
        unitNumber = 0;
        while (pos < lEnd) {
          const t = readTag(lEnd, P_LIMIT);
          const wt = t & 7;
          const field = t >>> 3;
          if (field === 1) {
            if (wt !== VARINT) wrongType(P_LIMIT, "requests_per_unit", wt, VARINT);
            requestsPerUnit = readUint32(lEnd, P_LIMIT);
          } else if (field === 2) {
            if (wt !== VARINT) wrongType(P_LIMIT, "unit", wt, VARINT);
            unitNumber = readUint32(lEnd, P_LIMIT) | 0;
          } else {
            skipUnknown(wt, lEnd, P_LIMIT);
          }
        }
        break;
      }
      case 3: {
        if (wireType !== LEN) wrongType(P_DESCRIPTOR, "hits_addend", wireType, LEN);
        const hEnd = readLength(end, P_DESCRIPTOR);
        hasHits = true;
        hits = 0;
        while (pos < hEnd) {
          const t = readTag(hEnd, P_HITS);
          const wt = t & 7;
          if (t >>> 3 === 1) {
            if (wt !== VARINT) wrongType(P_HITS, "value", wt, VARINT);
            hits = readUint64(hEnd, P_HITS);
          } else {
            skipUnknown(wt, hEnd, P_HITS);
          }
        }
        break;
      }
      default:
        skipUnknown(wireType, end, P_DESCRIPTOR);
    }
  }
  overEntries ??= requestFault.entryCount(index, entryCount, bounds);
  if (entries === null) return null;

  let unit: Unit | undefined;
  if (hasLimit) {
    unit = overrideUnit(unitNumber);
    if (!unit) entryFault ??= requestFault.overrideUnit(index, unitNumber);
  }
  if (entryFault !== undefined) {
    descriptorFault ??= entryFault;
    return null;
  }
  const d: DescriptorRequest = { entries };
  if (hasLimit) d.override = { requestsPerUnit, unit: unit! };
  if (hasHits) d.hits = hits;
  return d;
}

const WALKED: DescriptorEntry = { key: "", value: "" };

function readEntry(end: number, build: boolean): DescriptorEntry {
  let keyStart = -1;
  let keyEnd = -1;
  let valueStart = -1;
  let valueEnd = -1;
  while (pos < end) {
    const tag = readTag(end, P_ENTRY);
    const wireType = tag & 7;
    const field = tag >>> 3;
    if (field === 1) {
      if (wireType !== LEN) wrongType(P_ENTRY, "key", wireType, LEN);
      keyEnd = readLength(end, P_ENTRY);
      keyStart = pos;
      pos = keyEnd;
    } else if (field === 2) {
      if (wireType !== LEN) wrongType(P_ENTRY, "value", wireType, LEN);
      valueEnd = readLength(end, P_ENTRY);
      valueStart = pos;
      pos = valueEnd;
    } else {
      skipUnknown(wireType, end, P_ENTRY);
    }
  }
  if (!build) return WALKED;
  return {
    key: keyStart < 0 ? "" : readString(keyStart, keyEnd),
    value: valueStart < 0 ? "" : readString(valueStart, valueEnd),
  };
}

// ---- wire primitives and their structural faults ------------------------------------------------------

/** A field tag: its number is 1..2^29-1, so the tag fits 32 bits and `>>> 3` / `& 7` apply. */
function readTag(end: number, path: string): number {
  const tag = readVarint(end, path);
  const field = Math.floor(tag / 8);
  if (field === 0 || field > 0x1fffffff) throw new Malformed(`malformed request: invalid field number ${field} in ${path}`);
  return tag;
}

/** A varint as a Number (exact to 2^53: enough for tags and lengths, whose bound is checked). */
function readVarint(end: number, path: string): number {
  // One byte: nearly every tag and length.
  if (pos < end && buf[pos] < 0x80) return buf[pos++];
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    if (pos >= end) throw new Malformed(`malformed request: truncated varint in ${path}`);
    const byte = buf[pos++];
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return value;
    scale *= 128;
  }
  throw new Malformed(`malformed request: varint longer than 10 bytes in ${path}`);
}

/** A length-delimited field's length; returns where it ends. */
function readLength(end: number, path: string): number {
  const len = readVarint(end, path);
  if (len > end - pos) throw new Malformed(`malformed request: field in ${path} runs past the end of its message`);
  return pos + len;
}

/** uint32 (and int32 with `| 0`): the low 32 bits of the varint. */
function readUint32(end: number, path: string): number {
  const start = pos;
  readVarint(end, path); // checks the structure and finds the end
  let value = 0;
  for (let i = start, shift = 0; i < pos && shift < 32; i++, shift += 7) value |= (buf[i] & 0x7f) << shift;
  return value >>> 0;
}

/** uint64 as protobufjs with longs: Number: the low 64 bits, hi * 2^32 + lo (rounded above 2^53). */
function readUint64(end: number, path: string): number {
  const start = pos;
  readVarint(end, path);
  let lo = 0;
  let hi = 0;
  for (let i = 0; start + i < pos; i++) {
    const bits = buf[start + i] & 0x7f;
    if (i < 4) lo |= bits << (7 * i);
    else if (i === 4) {
      lo |= bits << 28;
      hi |= bits >> 4;
    } else hi |= bits << (7 * (i - 5) + 3);
  }
  return (lo >>> 0) + (hi >>> 0) * 4294967296;
}

function skipUnknown(wireType: number, end: number, path: string): void {
  switch (wireType) {
    case VARINT:
      readVarint(end, path);
      return;
    case I64:
      skipBytes(8, end, path);
      return;
    case I32:
      skipBytes(4, end, path);
      return;
    case LEN:
      pos = readLength(end, path);
      return;
    default:
      throw new Malformed(`malformed request: wire type ${wireType} in ${path} (groups and unknown types are not accepted)`);
  }
}

function skipBytes(n: number, end: number, path: string): void {
  if (n > end - pos) throw new Malformed(`malformed request: field in ${path} runs past the end of its message`);
  pos += n;
}

function wrongType(path: string, name: string, wireType: number, expected: number): never {
  throw new Malformed(`malformed request: ${path}.${name} has wire type ${wireType}, expected ${expected}`);
}

/** UTF-8 (bad bytes become U+FFFD, as Buffer and protobufjs decode); short ASCII without a native call. */
function readString(start: number, end: number): string {
  if (end - start > 24) return buf.toString("utf8", start, end);
  let s = "";
  for (let i = start; i < end; i++) {
    const c = buf[i];
    if (c >= 0x80) return buf.toString("utf8", start, end);
    s += String.fromCharCode(c);
  }
  return s;
}
