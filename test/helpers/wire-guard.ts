// Test oracle, part of the grpc-js reference codec that test/unit/h2-codec.test.ts holds h2's decoder to
// (sluice served with it before h2/; src/server/grpc/h2/decode-request.ts does all of this in its one pass).
// Checks a RateLimitRequest's wire bytes before protobufjs decodes them: counts of repeated fields
// against the bounds (so 500,000 empty descriptors cost a scan, not 500,000 objects), and the wire
// type of every known field (protobufjs would read a wrong one as garbage). Group wire types are
// refused outright: proto3 never sends them and skipping them would recurse.
import type { RequestBounds } from "../../src/server/grpc/decode.js";

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

/** A request refused before decoding; the handler answers INVALID_ARGUMENT with the message. */
export class RejectedRequest {
  constructor(readonly message: string) {}
}

type Schema = Record<number, { name: string; wireType: number; message?: Schema; repeated?: "descriptors" | "entries" }>;

const UINT64_VALUE: Schema = { 1: { name: "value", wireType: VARINT } };
const OVERRIDE: Schema = { 1: { name: "requests_per_unit", wireType: VARINT }, 2: { name: "unit", wireType: VARINT } };
const ENTRY: Schema = { 1: { name: "key", wireType: LEN }, 2: { name: "value", wireType: LEN } };
const DESCRIPTOR: Schema = {
  1: { name: "entries", wireType: LEN, message: ENTRY, repeated: "entries" },
  2: { name: "limit", wireType: LEN, message: OVERRIDE },
  3: { name: "hits_addend", wireType: LEN, message: UINT64_VALUE },
};
const REQUEST: Schema = {
  1: { name: "domain", wireType: LEN },
  2: { name: "descriptors", wireType: LEN, message: DESCRIPTOR, repeated: "descriptors" },
  3: { name: "hits_addend", wireType: VARINT },
};

class Malformed extends Error {}

/** undefined when the bytes may be decoded; otherwise why not (same wording as decode.ts). */
export function checkRequestWire(buf: Uint8Array, b: RequestBounds): string | undefined {
  let descriptors = 0;
  let entries = 0;
  let overEntries: string | undefined;
  const closeDescriptor = () => {
    if (entries > b.maxEntries && overEntries === undefined) {
      overEntries = `descriptor ${descriptors - 1} has ${entries} entries, more than the maximum ${b.maxEntries}`;
    }
  };
  try {
    walk(buf, 0, buf.length, REQUEST, "request", (kind) => {
      if (kind === "entries") {
        entries++;
        return;
      }
      closeDescriptor();
      descriptors++;
      entries = 0;
    });
    closeDescriptor();
  } catch (err) {
    if (err instanceof Malformed) return err.message;
    throw err;
  }
  if (descriptors > b.maxDescriptors) {
    return `request has ${descriptors} descriptors, more than the maximum ${b.maxDescriptors}`;
  }
  return overEntries;
}

type OnRepeated = (kind: "descriptors" | "entries") => void;

/** Walks one message and the known messages inside it; onRepeated hears each repeated element, in order. */
function walk(buf: Uint8Array, pos: number, end: number, schema: Schema, path: string, onRepeated: OnRepeated): void {
  while (pos < end) {
    let tag: number;
    [tag, pos] = varint(buf, pos, end, path);
    const field = Math.floor(tag / 8);
    const wireType = tag & 7;
    if (field === 0 || field > 0x1fffffff) throw new Malformed(`malformed request: invalid field number ${field} in ${path}`);
    const known = schema[field];
    if (known && known.wireType !== wireType) {
      throw new Malformed(`malformed request: ${path}.${known.name} has wire type ${wireType}, expected ${known.wireType}`);
    }
    switch (wireType) {
      case VARINT:
        [, pos] = varint(buf, pos, end, path);
        break;
      case I64:
        pos = skip(pos, 8, end, path);
        break;
      case I32:
        pos = skip(pos, 4, end, path);
        break;
      case LEN: {
        let len: number;
        [len, pos] = varint(buf, pos, end, path);
        const start = pos;
        pos = skip(pos, len, end, path);
        if (known?.repeated) onRepeated(known.repeated);
        if (known?.message) walk(buf, start, pos, known.message, `${path}.${known.name}`, onRepeated);
        break;
      }
      default:
        throw new Malformed(`malformed request: wire type ${wireType} in ${path} (groups and unknown types are not accepted)`);
    }
  }
}

function varint(buf: Uint8Array, pos: number, end: number, path: string): [number, number] {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    if (pos >= end) throw new Malformed(`malformed request: truncated varint in ${path}`);
    const byte = buf[pos++];
    value += (byte & 0x7f) * scale; // a Number: exact up to 2^53, enough for lengths and tags
    if (byte < 0x80) return [value, pos];
    scale *= 128;
  }
  throw new Malformed(`malformed request: varint longer than 10 bytes in ${path}`);
}

function skip(pos: number, len: number, end: number, path: string): number {
  if (len > end - pos) throw new Malformed(`malformed request: field in ${path} runs past the end of its message`);
  return pos + len;
}
