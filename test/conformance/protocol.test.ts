// Conformance, gRPC over HTTP/2 (grpc PROTOCOL-HTTP2.md, compression.md): content-type, trailers-only
// errors, grpc-message percent-encoding, grpc-timeout, message size before buffering, compression,
// unknown methods. Raw node:http2 calls, so every header and frame flag is visible.
import type http2 from "node:http2";
import zlib from "node:zlib";
import type * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rlsClient } from "../helpers/grpc-client.js";
import { closeSession, h2Call, h2Session, HEALTH_CHECK_PATH, SPEC_ENCODED } from "../helpers/h2-call.js";
import { encodeRequest, grpcFrame, lenField, padTo } from "../../bench/lib/frame.mjs";
import { GRPC, isOkResponse, MAX_MESSAGE_BYTES, serve, validCall, validRequest, type Served } from "./harness.js";

const COMPRESSED_UNDER_IDENTITY = "Received a compressed message, but the call's grpc-encoding is identity (this server accepts identity only)";

describe("gRPC protocol", () => {
  let s: Served;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    s = await serve();
    session = h2Session(s.port);
  });
  afterAll(async () => {
    await closeSession(session);
    await s?.stop();
  });

  it("a valid call: response HEADERS, one message (overall_code OK), trailers with grpc-status 0", async () => {
    const a = await h2Call(session, { body: validCall("ok") }).closed;
    expect(a.httpStatus).toBe(200);
    expect(String(a.headers?.["content-type"])).toMatch(/^application\/grpc/);
    expect(a.headersEndStream).toBe(false);
    expect(isOkResponse(a.data)).toBe(true);
    expect([a.trailers?.["grpc-status"], a.grpcStatus]).toEqual(["0", GRPC.OK]); // grpc-message on OK: free text
  });

  it("content-type: not application/grpc gets HTTP 415 and no grpc-status; application/grpc+proto is served", async () => {
    for (const contentType of ["text/plain", "application/json", undefined]) {
      const a = await h2Call(session, { body: validCall(), headers: { "content-type": contentType } }).closed;
      expect([contentType, a.httpStatus, a.grpcStatus, a.headersEndStream]).toEqual([contentType, 415, undefined, true]);
    }
    const proto = await h2Call(session, { body: validCall(), headers: { "content-type": "application/grpc+proto" } }).closed;
    expect([proto.httpStatus, proto.grpcStatus]).toEqual([200, GRPC.OK]);
  });

  // Other protocols that share the prefix are not gRPC over HTTP/2 with protobuf: HTTP 415 (Unsupported
  // Media Type, as for any content-type this server cannot read), not a 200 their client might misread.
  // gRPC-Web needs a proxy that speaks it; a gRPC client with the JSON codec sees "HTTP status 415".
  it("content-type of another codec or protocol (grpc+json, grpc-web): HTTP 415, no grpc-status, the store never asked", async () => {
    const arrivals = s.store.arrivals;
    for (const contentType of ["application/grpc+json", "application/grpc-web", "application/grpc-web+proto", "application/grpc-web-text"]) {
      const a = await h2Call(session, { body: validCall(), headers: { "content-type": contentType } }).closed;
      expect([contentType, a.httpStatus, a.grpcStatus, a.headersEndStream, a.data.length]).toEqual([contentType, 415, undefined, true, 0]);
    }
    expect(s.store.arrivals).toBe(arrivals);
  });

  // PROTOCOL-HTTP2.md: ":method POST" only. HTTP's own answer (RFC 9110 15.5.6): 405 naming the allowed method.
  it("GET (or any method but POST): HTTP 405 with allow: POST, no grpc-status", async () => {
    for (const method of ["GET", "PUT"]) {
      const a = await h2Call(session, { body: method === "GET" ? undefined : validCall(), headers: { ":method": method } }).closed;
      expect([method, a.httpStatus, a.headers?.allow, a.grpcStatus, a.headersEndStream]).toEqual([method, 405, "POST", undefined, true]);
    }
  });

  // A unary call carries exactly one length-prefixed message (doc/statuscodes.md: a cardinality violation
  // is UNIMPLEMENTED). Bytes after it that are fewer than a prefix are not a message: named as stray.
  it("a valid message then 3 stray bytes: UNIMPLEMENTED naming them; then a second message: UNIMPLEMENTED; the store never asked", async () => {
    const arrivals = s.store.arrivals;
    const stray = await h2Call(session, { body: Buffer.concat([validCall("stray"), Buffer.from([0, 0, 1])]) }).closed;
    expect([stray.grpcStatus, stray.message, stray.headersEndStream]).toEqual([
      GRPC.UNIMPLEMENTED,
      "Received 3 stray bytes after the request message (not a message: a prefix is 5 bytes)",
      true,
    ]);
    const second = await h2Call(session, { body: Buffer.concat([validCall("second"), validCall("second")]) }).closed;
    expect([second.grpcStatus, second.message, second.headersEndStream]).toEqual([
      GRPC.UNIMPLEMENTED,
      "Received a second request message for a unary call",
      true,
    ]);
    expect(s.store.arrivals).toBe(arrivals);
  });

  it("an error is trailers-only: one HEADERS frame with END_STREAM carrying :status 200 and grpc-status", async () => {
    const arrivals = s.store.arrivals;
    const a = await h2Call(session, { body: grpcFrame(encodeRequest("", [[["k", "v"]]])) }).closed;
    expect(a.headersEndStream).toBe(true);
    expect(a.trailers).toBeUndefined();
    expect(a.data.length).toBe(0);
    expect(a.httpStatus).toBe(200);
    expect(String(a.headers?.["content-type"])).toMatch(/^application\/grpc/);
    expect([a.grpcStatus, a.message]).toEqual([GRPC.INVALID_ARGUMENT, "domain must not be empty"]);
    expect(s.store.arrivals).toBe(arrivals);
  });

  it("grpc-message is percent-encoded: non-ASCII and '%' echoed from the request arrive intact", async () => {
    const service = "rls ü 100% ✓";
    const a = await h2Call(session, { path: HEALTH_CHECK_PATH, body: grpcFrame(lenField(1, service)) }).closed;
    expect([a.grpcStatus, a.message, a.headersEndStream]).toEqual([GRPC.NOT_FOUND, `unknown service ${service}`, true]);
    expect(a.rawMessage).toMatch(SPEC_ENCODED);
    expect(a.rawMessage).toMatch(/%C3%BC/i); // ü as UTF-8 bytes
    expect(a.rawMessage).toMatch(/100%25/); // '%' itself encoded

    const path = "/envoy.service.ratelimit.v3.RateLimitService/No%41Such";
    const u = await h2Call(session, { path, body: validCall() }).closed;
    expect([u.grpcStatus, u.message, u.headersEndStream]).toEqual([GRPC.UNIMPLEMENTED, `unknown method ${path}`, true]);
    expect(u.rawMessage).toMatch(SPEC_ENCODED);

    // grpc-js's client decodes it to the same text.
    const client = rlsClient(s.port);
    try {
      const err = (await client.health(service).then(
        () => undefined,
        (e) => e,
      )) as grpc.ServiceError;
      expect([err.code, err.details]).toEqual([GRPC.NOT_FOUND, `unknown service ${service}`]);
    } finally {
      client.close();
    }
  });

  it("unknown service or method: UNIMPLEMENTED naming the path, trailers-only", async () => {
    const a = await h2Call(session, { path: "/no.such.Service/Method", body: validCall() }).closed;
    expect([a.grpcStatus, a.message, a.headersEndStream]).toEqual([GRPC.UNIMPLEMENTED, "unknown method /no.such.Service/Method", true]);
  });

  it("grpc-timeout: a call held in the store past it gets DEADLINE_EXCEEDED (1m and 200m)", async () => {
    s.store.hold();
    try {
      const quick = await h2Call(session, { body: validCall("t1"), headers: { "grpc-timeout": "1m" } }).answered;
      expect([quick.grpcStatus, quick.message, quick.headersEndStream]).toEqual([GRPC.DEADLINE_EXCEEDED, "Deadline exceeded", true]);
      expect(quick.ms).toBeLessThan(5000);

      const timed = await h2Call(session, { body: validCall("t2"), headers: { "grpc-timeout": "200m" } }).answered;
      expect([timed.grpcStatus, timed.message]).toEqual([GRPC.DEADLINE_EXCEEDED, "Deadline exceeded"]);
      expect(timed.ms).toBeGreaterThanOrEqual(180);
      expect(timed.ms).toBeLessThan(5000);
      expect(s.store.waitingCount).toBe(2); // both reached the store and are still there: the deadline answered
    } finally {
      s.store.release();
    }
  });

  it("message size: the cap passes; over it, RESOURCE_EXHAUSTED from the length prefix while the body is still being sent", async () => {
    const atCap = padTo(validRequest("size"), MAX_MESSAGE_BYTES);
    const ok = await h2Call(session, { body: grpcFrame(atCap) }).closed;
    expect(ok.grpcStatus).toBe(GRPC.OK);

    const arrivals = s.store.arrivals;
    const claimed = 1_000_000;
    // 5-byte prefix claiming a 1 MB message, 100 bytes of it, and the stream left open.
    const call = h2Call(session, { body: grpcFrame(Buffer.alloc(100, 0x61), { length: claimed }), end: false });
    const a = await call.answered;
    expect([a.grpcStatus, a.message, a.headersEndStream]).toEqual([
      GRPC.RESOURCE_EXHAUSTED,
      `Received message larger than max (${claimed} vs ${MAX_MESSAGE_BYTES})`,
      true,
    ]);
    expect(call.stream.writableEnded).toBe(false); // answered before the client finished sending
    call.stream.close();
    await call.closed;

    const over = await h2Call(session, { body: grpcFrame(padTo(validRequest("size"), MAX_MESSAGE_BYTES + 1)) }).closed;
    expect([over.grpcStatus, over.message]).toEqual([
      GRPC.RESOURCE_EXHAUSTED,
      `Received message larger than max (${MAX_MESSAGE_BYTES + 1} vs ${MAX_MESSAGE_BYTES})`,
    ]);
    expect(s.store.arrivals).toBe(arrivals);
  });

  // grpc compression.md: a message compressed in an encoding the server does not support fails with
  // UNIMPLEMENTED and grpc-accept-encoding listing the supported ones; a compressed flag without an
  // encoding other than identity fails with INTERNAL (its test case 6). Only identity is supported here.
  it("compression: grpc-encoding other than identity is UNIMPLEMENTED (grpc-accept-encoding: identity); a compressed flag under identity is INTERNAL", async () => {
    const arrivals = s.store.arrivals;
    const cases: { name: string; headers: Record<string, string>; body: Buffer; code: number; message: string }[] = [
      {
        name: "gzip",
        headers: { "grpc-encoding": "gzip" },
        body: grpcFrame(zlib.gzipSync(validRequest()), { compressed: true }),
        code: GRPC.UNIMPLEMENTED,
        message: "grpc-encoding gzip is not supported (this server accepts identity only)",
      },
      {
        name: "deflate",
        headers: { "grpc-encoding": "deflate" },
        body: grpcFrame(zlib.deflateSync(validRequest()), { compressed: true }),
        code: GRPC.UNIMPLEMENTED,
        message: "grpc-encoding deflate is not supported (this server accepts identity only)",
      },
      {
        name: "unknown",
        headers: { "grpc-encoding": "snappy" },
        body: grpcFrame(validRequest(), { compressed: true }),
        code: GRPC.UNIMPLEMENTED,
        message: "grpc-encoding snappy is not supported (this server accepts identity only)",
      },
      {
        name: "gzip, flag 0",
        headers: { "grpc-encoding": "gzip" },
        body: validCall(),
        code: GRPC.UNIMPLEMENTED,
        message: "grpc-encoding gzip is not supported (this server accepts identity only)",
      },
      {
        name: "flag, no encoding",
        headers: {},
        body: grpcFrame(validRequest(), { compressed: true }),
        code: GRPC.INTERNAL,
        message: COMPRESSED_UNDER_IDENTITY,
      },
      {
        name: "flag, identity",
        headers: { "grpc-encoding": "identity" },
        body: grpcFrame(validRequest(), { compressed: true }),
        code: GRPC.INTERNAL,
        message: COMPRESSED_UNDER_IDENTITY,
      },
    ];
    for (const c of cases) {
      const a = await h2Call(session, { headers: c.headers, body: c.body }).closed;
      expect([c.name, a.grpcStatus, a.message, a.headersEndStream]).toEqual([c.name, c.code, c.message, true]);
      if (c.code === GRPC.UNIMPLEMENTED) expect([c.name, a.headers?.["grpc-accept-encoding"]]).toEqual([c.name, "identity"]);
    }
    expect(s.store.arrivals).toBe(arrivals); // none was decoded
    const identity = await h2Call(session, { headers: { "grpc-encoding": "identity" }, body: validCall() }).closed;
    expect(identity.grpcStatus).toBe(GRPC.OK);
  });
});
