// The h2 transport's small pure parts: message framing, grpc-timeout, grpc-message encoding, the
// health request.
import { describe, expect, it } from "vitest";
import { parseTimeout, UnaryBody } from "../../src/server/grpc/h2/framing.js";
import { requestedService } from "../../src/server/grpc/h2/health.js";
import { encodeGrpcMessage as percentEncode } from "../../src/server/grpc/h2/refusals.js";
import { trailersOnly } from "../../src/server/grpc/h2/status.js";
import { grpcFrame, lenField, tag, varintField } from "../../bench/lib/frame.mjs";

describe("UnaryBody", () => {
  const message = Buffer.from("hello, unary");
  const frame = grpcFrame(message);

  it("a message in one chunk is a view of it; in any split it is gathered whole, and held bytes are counted", () => {
    const whole = new UnaryBody();
    expect(whole.take(frame, 100)).toBeUndefined();
    expect(whole.message?.toString()).toBe("hello, unary");
    expect(whole.message?.buffer).toBe(frame.buffer);
    expect(whole.finish()).toBeUndefined();

    for (let cut = 1; cut < frame.length; cut++) {
      const b = new UnaryBody();
      expect(b.take(frame.subarray(0, cut), 100)).toBeUndefined();
      expect(b.held).toBe(Math.max(0, cut - 5));
      expect(b.take(frame.subarray(cut), 100)).toBeUndefined();
      expect([cut, b.message?.toString(), b.held]).toEqual([cut, "hello, unary", 0]);
    }
  });

  it("faults: size from the prefix alone, flags, a second message, none, truncation", () => {
    const over = new UnaryBody();
    expect(over.take(grpcFrame(Buffer.alloc(3), { length: 101 }).subarray(0, 5), 100)).toEqual({
      code: 8,
      message: "Received message larger than max (101 vs 100)",
    });
    expect(new UnaryBody().take(grpcFrame(message, { compressed: true }), 100)?.code).toBe(13);
    expect(new UnaryBody().take(Buffer.from([7, 0, 0, 0, 0]), 100)).toEqual({ code: 13, message: "malformed message prefix: flags byte 7, expected 0 or 1" });
    // A second message is refused at its prefix; fewer bytes than a prefix after the message, at the end.
    expect(new UnaryBody().take(Buffer.concat([frame, grpcFrame(Buffer.alloc(0))]), 100)).toEqual({
      code: 12,
      message: "Received a second request message for a unary call",
    });
    const split = new UnaryBody();
    expect([split.take(Buffer.concat([frame, Buffer.from([0, 0])]), 100), split.take(Buffer.from([0, 0]), 100), split.take(Buffer.from([0]), 100)]).toEqual([
      undefined,
      undefined,
      { code: 12, message: "Received a second request message for a unary call" },
    ]);
    const stray = new UnaryBody();
    expect(stray.take(Buffer.concat([frame, Buffer.from([1, 2, 3])]), 100)).toBeUndefined();
    expect([stray.message?.toString(), stray.finish()]).toEqual([
      "hello, unary",
      { code: 12, message: "Received 3 stray bytes after the request message (not a message: a prefix is 5 bytes)" },
    ]);
    expect(new UnaryBody().finish()).toEqual({ code: 12, message: "Received no request message" });
    const partial = new UnaryBody();
    partial.take(frame.subarray(0, 9), 100);
    expect(partial.finish()).toEqual({ code: 12, message: `Received no request message: the body ended inside a message (4 of its ${message.length} bytes)` });
    const empty = new UnaryBody();
    expect(empty.take(grpcFrame(Buffer.alloc(0)), 100)).toBeUndefined();
    expect([empty.message?.length, empty.finish()]).toEqual([0, undefined]);
  });
});

describe("parseTimeout", () => {
  it("1 to 8 digits and a unit, in milliseconds; anything else NaN", () => {
    expect([parseTimeout("20m"), parseTimeout("1S"), parseTimeout("2M"), parseTimeout("1H"), parseTimeout("1500u"), parseTimeout("3000000n")]).toEqual([
      20, 1000, 120_000, 3_600_000, 1.5, 3,
    ]);
    expect(parseTimeout("99999999H")).toBe(99_999_999 * 3_600_000);
    for (const bad of ["", "m", "20", "123456789m", "20x", "2 m", "-2m", "2.0m", "20M ", "٣m"]) expect([bad, parseTimeout(bad)]).toEqual([bad, NaN]);
  });
});

describe("grpc-message", () => {
  it("percent-encodes bytes outside 0x20-0x7E and '%', as UTF-8; plain ASCII as it is", () => {
    expect(percentEncode("domain must not be empty")).toBe("domain must not be empty");
    expect(percentEncode("100% ü\n✓")).toBe("100%25 %C3%BC%0A%E2%9C%93");
    expect(decodeURIComponent(percentEncode("100% ü\n✓ 😀"))).toBe("100% ü\n✓ 😀");
  });

  it("a trailers-only answer: :status 200, content-type, grpc-accept-encoding, grpc-status, grpc-message (bounded)", () => {
    expect(trailersOnly(3, "x")).toEqual([
      ":status",
      "200",
      "content-type",
      "application/grpc",
      "grpc-accept-encoding",
      "identity",
      "grpc-status",
      "3",
      "grpc-message",
      "x",
    ]);
    expect(trailersOnly(5, "y".repeat(5000))[9]).toBe("y".repeat(1024) + "...");
  });
});

describe("requestedService", () => {
  it("the last service field; unknown fields skipped; bad bytes a fault", () => {
    expect(requestedService(Buffer.alloc(0))).toBe("");
    expect(requestedService(Buffer.concat([lenField(1, "a"), varintField(2, 5), lenField(1, "svc ü")]))).toBe("svc ü");
    expect(requestedService(varintField(1, 1))).toEqual({ code: 3, message: "malformed health check request: service has wire type 0, expected 2" });
    expect(requestedService(Buffer.from([0x0a, 0x05, 0x61]))).toEqual({
      code: 3,
      message: "malformed health check request: field runs past the end of the message",
    });
    expect(requestedService(tag(3, 3))).toEqual({
      code: 3,
      message: "malformed health check request: wire type 3 (groups and unknown types are not accepted)",
    });
  });
});
