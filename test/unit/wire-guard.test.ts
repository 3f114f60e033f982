// The reference codec's wire check (test/helpers/wire-guard.ts, h2's oracle): counts, wire types, structure.
import { describe, expect, it } from "vitest";
import { checkRequestWire } from "../helpers/wire-guard.js";
import { encodeRequest, lenField, tag, varint, varintField } from "../../bench/lib/frame.mjs";

const B = { maxDescriptors: 3, maxEntries: 2, maxKeyLength: 8, maxValueLength: 16 };
const d = (n: number): [string, string][] => Array.from({ length: n }, (_, i) => [`k${i}`, "v"]);

describe("checkRequestWire", () => {
  it("accepts a well-formed request at every count limit, and unknown fields", () => {
    expect(checkRequestWire(encodeRequest("x", [d(2), d(2), d(2)]), B)).toBeUndefined();
    expect(checkRequestWire(encodeRequest("x", [d(1)], [lenField(99, "junk"), varintField(98, 7)]), B)).toBeUndefined();
    expect(checkRequestWire(Buffer.alloc(0), B)).toBeUndefined(); // empty: decode.ts says what is missing
  });

  it("counts descriptors and entries without decoding them", () => {
    expect(checkRequestWire(encodeRequest("x", [d(1), d(1), d(1), d(1)]), B)).toBe("request has 4 descriptors, more than the maximum 3");
    expect(checkRequestWire(encodeRequest("x", [d(1), d(3), d(5)]), B)).toBe("descriptor 1 has 3 entries, more than the maximum 2");
    // 500,000 empty descriptors in 1 MB: refused after a scan.
    const flood = Buffer.concat([lenField(1, "x"), Buffer.alloc(1_000_000, Buffer.from([0x12, 0x00]))]);
    expect(checkRequestWire(flood, B)).toBe("request has 500000 descriptors, more than the maximum 3");
  });

  it("refuses a known field with the wrong wire type", () => {
    expect(checkRequestWire(varintField(1, 5), B)).toBe("malformed request: request.domain has wire type 0, expected 2");
    expect(checkRequestWire(Buffer.concat([lenField(1, "x"), lenField(3, "x")]), B)).toBe("malformed request: request.hits_addend has wire type 2, expected 0");
    const badEntry = lenField(2, lenField(1, varintField(2, 1)));
    expect(checkRequestWire(badEntry, B)).toBe("malformed request: request.descriptors.entries.value has wire type 0, expected 2");
    const badOverride = lenField(2, lenField(2, lenField(1, "x")));
    expect(checkRequestWire(badOverride, B)).toBe("malformed request: request.descriptors.limit.requests_per_unit has wire type 2, expected 0");
  });

  it("refuses groups, truncation, lengths past the end, and overlong varints", () => {
    // 10,000 nested start-group tags of an unknown field (4): refused at the first, no recursion.
    expect(checkRequestWire(Buffer.alloc(10_000, 0x23), B)).toBe("malformed request: wire type 3 in request (groups and unknown types are not accepted)");
    expect(checkRequestWire(Buffer.from([0x0a]), B)).toBe("malformed request: truncated varint in request");
    expect(checkRequestWire(Buffer.from([0x0a, 0x05, 0x61]), B)).toBe("malformed request: field in request runs past the end of its message");
    expect(checkRequestWire(Buffer.concat([tag(4, 0), Buffer.alloc(11, 0xff)]), B)).toBe("malformed request: varint longer than 10 bytes in request");
    expect(checkRequestWire(Buffer.concat([varint(0), varint(1)]), B)).toBe("malformed request: invalid field number 0 in request");
    // A descriptor whose own length fits but whose entry runs past the descriptor's end.
    const inner = Buffer.concat([tag(1, 2), varint(50), Buffer.from("ab")]);
    expect(checkRequestWire(Buffer.concat([lenField(2, inner), Buffer.alloc(60)]), B)).toBe(
      "malformed request: field in request.descriptors runs past the end of its message",
    );
  });
});
