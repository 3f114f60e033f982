// Conformance, the connection: graceful shutdown (GOAWAY, calls in flight answered, grace bound),
// the cap on concurrent streams, the cut for request bodies that never end, SO_REUSEPORT, HTTP/2
// keepalive.
// A raw HTTP/2 peer (test/helpers/h2-peer.ts) does what node's client will not: open a stream after
// GOAWAY or past the cap, leave PINGs unanswered.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, rlsClient } from "../helpers/grpc-client.js";
import { closeSession, connected, h2Call, h2Session, remoteSettings, RLS_PATH } from "../helpers/h2-call.js";
import { FLAG, FRAME, goawayCode, goawayLastStream, grpcRequestHeaders, h2Peer, H2_ERROR, rstCode } from "../helpers/h2-peer.js";
import { DOMAIN, GRPC, isOkResponse, MAX_STREAMS, serve, tryConnect, validCall, within, type Served } from "./harness.js";

const BODY_TIMEOUT_MS = 300;
const KEEPALIVE = { intervalMs: 200, timeoutMs: 300 };

describe("connections", () => {
  describe("graceful shutdown", () => {
    it("calls in flight are answered after shutdown starts; GOAWAY; a later stream on that connection is not served; new connections are refused; resolves true", async () => {
      const s = await serve();
      const client = rlsClient(s.port);
      try {
        s.store.hold();
        const peer = await h2Peer(s.port);
        peer.headers(1, grpcRequestHeaders(s.port, RLS_PATH));
        peer.data(1, validCall("drain-raw"), true);
        const viaGrpcJs = client.shouldRateLimit({ domain: DOMAIN, descriptors: [descriptor({ k: "drain-grpc-js" })] }, 20_000);
        await s.store.whenWaiting(2);

        const stopped = s.shutdown(10_000);
        let resolved = false;
        void stopped.then(() => (resolved = true));
        const goaway = await peer.waitFor("GOAWAY", (f) => f.type === FRAME.GOAWAY);
        expect([goawayCode(goaway), goawayLastStream(goaway)]).toEqual([H2_ERROR.NO_ERROR, 1]);
        peer.headers(3, grpcRequestHeaders(s.port, RLS_PATH));
        peer.data(3, validCall("too-late"), true);
        expect(await tryConnect(s.port)).toBe("ECONNREFUSED");
        expect(resolved).toBe(false); // two calls are still in flight

        s.store.release();
        expect((await within("the grpc-js call", viaGrpcJs)).overall_code).toBe(OK);
        await peer.waitFor("stream 1's trailers", (f) => f.type === FRAME.HEADERS && f.streamId === 1 && (f.flags & FLAG.END_STREAM) !== 0);
        const data = peer.frames.filter((f) => f.type === FRAME.DATA && f.streamId === 1).map((f) => f.payload);
        expect(isOkResponse(Buffer.concat(data))).toBe(true);
        expect(await within("shutdown", stopped)).toBe(true);
        await within("the connection to close", peer.closed);

        // Stream 3 came after GOAWAY: ignored, or refused with REFUSED_STREAM; never answered.
        const late = peer.frames.filter((f) => f.streamId === 3);
        expect(late.filter((f) => f.type !== FRAME.RST_STREAM)).toEqual([]);
        for (const f of late) expect(rstCode(f)).toBe(H2_ERROR.REFUSED_STREAM);
        expect([s.store.arrivals, s.decided]).toEqual([2, 2]);
      } finally {
        client.close();
        await s.stop();
      }
    });

    it("calls held past graceMs are cut (CANCEL on the wire, no grpc-status) and shutdown resolves false", async () => {
      const s = await serve();
      const session = h2Session(s.port);
      const client = rlsClient(s.port);
      try {
        s.store.hold();
        const call = h2Call(session, { body: validCall("stuck") });
        const viaGrpcJs = client.shouldRateLimit({ domain: DOMAIN, descriptors: [descriptor({ k: "stuck-grpc-js" })] }, 20_000).catch((e) => e);
        await s.store.whenWaiting(2);
        const started = performance.now();
        expect(await within("shutdown", s.shutdown(300))).toBe(false);
        expect(performance.now() - started).toBeGreaterThanOrEqual(290);
        const a = await within("the cut call to close", call.closed);
        expect([a.grpcStatus, a.rstCode]).toEqual([undefined, 8 /* CANCEL */]);
        // grpc-js says CANCELLED for a stream reset, UNAVAILABLE for a connection closed under it: both are "cut".
        expect([GRPC.CANCELLED, GRPC.UNAVAILABLE]).toContain((await within("the grpc-js call to fail", viaGrpcJs)).code);
      } finally {
        client.close();
        await closeSession(session);
        await s.stop();
      }
    });
  });

  describe("concurrent streams per connection", () => {
    let s: Served;
    beforeAll(async () => {
      s = await serve();
    });
    afterAll(async () => {
      await s?.stop();
    });

    it("SETTINGS_MAX_CONCURRENT_STREAMS is maxConcurrentStreams; a node client's stream cap+1 waits until one is free", async () => {
      const session = h2Session(s.port);
      try {
        expect((await remoteSettings(session)).maxConcurrentStreams).toBe(MAX_STREAMS);
        const base = s.store.arrivals;
        s.store.hold();
        const calls = Array.from({ length: MAX_STREAMS + 1 }, (_, i) => h2Call(session, { body: validCall(`cap${i}`) }));
        await s.store.whenWaiting(MAX_STREAMS);
        // A PING round trip on the same connection: the server has read whatever was sent before it.
        await connected(session);
        await new Promise<void>((resolve, reject) => session.ping((err) => (err ? reject(err) : resolve())));
        expect(s.store.arrivals - base).toBe(MAX_STREAMS);

        s.store.releaseOne();
        await s.store.whenArrived(base + MAX_STREAMS + 1);
        s.store.release();
        const answers = await Promise.all(calls.map((c) => c.closed));
        expect(answers.map((a) => a.grpcStatus)).toEqual(Array(MAX_STREAMS + 1).fill(GRPC.OK));
      } finally {
        s.store.release();
        await closeSession(session);
      }
    });

    it("a client that opens stream cap+1 anyway is refused (REFUSED_STREAM, or GOAWAY PROTOCOL_ERROR after stream cap); that call never reaches the store", async () => {
      const peer = await h2Peer(s.port);
      try {
        await peer.waitFor("the server's SETTINGS", (f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0);
        const base = s.store.arrivals;
        s.store.hold();
        for (let i = 0; i < MAX_STREAMS; i++) {
          peer.headers(1 + 2 * i, grpcRequestHeaders(s.port, RLS_PATH));
          peer.data(1 + 2 * i, validCall(`over${i}`), true);
        }
        await s.store.whenWaiting(MAX_STREAMS);
        const extra = 1 + 2 * MAX_STREAMS;
        peer.headers(extra, grpcRequestHeaders(s.port, RLS_PATH));
        peer.data(extra, validCall("over-cap"), true);
        const refusal = await peer.waitFor("a refusal", (f) => (f.type === FRAME.RST_STREAM && f.streamId === extra) || f.type === FRAME.GOAWAY);
        if (refusal.type === FRAME.RST_STREAM) expect(rstCode(refusal)).toBe(H2_ERROR.REFUSED_STREAM);
        else expect([goawayCode(refusal), goawayLastStream(refusal)]).toEqual([H2_ERROR.PROTOCOL_ERROR, extra - 2]);
        expect(peer.frames.filter((f) => f.streamId === extra && f.type !== FRAME.RST_STREAM)).toEqual([]);
        expect(s.store.arrivals - base).toBe(MAX_STREAMS);
      } finally {
        s.store.release();
        peer.destroy();
      }
    });
  });

  describe("request bodies that never end", () => {
    let s: Served;
    beforeAll(async () => {
      s = await serve({ bodyTimeoutMs: BODY_TIMEOUT_MS });
    });
    afterAll(async () => {
      await s?.stop();
    });

    it("are cut with RST_STREAM CANCEL after bodyTimeoutMs; a complete call is not, however slow; the connection keeps serving", async () => {
      const session = h2Session(s.port);
      try {
        s.store.hold();
        const slow = h2Call(session, { body: validCall("slow") });
        await s.store.whenWaiting(1);
        let slowClosed = false;
        void slow.closed.then(() => (slowClosed = true));

        const silent = h2Call(session, { end: false }); // headers, then nothing
        const partial = h2Call(session, { body: validCall("partial").subarray(0, 8), end: false }); // prefix + 3 bytes
        for (const a of await Promise.all([silent.closed, partial.closed])) {
          expect([a.rstCode, a.httpStatus, a.grpcStatus]).toEqual([8 /* CANCEL */, undefined, undefined]);
          expect(a.ms).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 10);
          expect(a.ms).toBeLessThan(BODY_TIMEOUT_MS + 5000);
        }
        // The slow call started before them and has waited longer than bodyTimeoutMs: not cut.
        expect(slowClosed).toBe(false);
        s.store.release();
        const answered = await slow.closed;
        expect([answered.grpcStatus, isOkResponse(answered.data)]).toEqual([GRPC.OK, true]);

        const after = await h2Call(session, { body: validCall("after") }).closed;
        expect(after.grpcStatus).toBe(GRPC.OK);
        expect(session.destroyed).toBe(false);
      } finally {
        s.store.release();
        await closeSession(session);
      }
    });
  });

  describe("max connections", () => {
    it("past maxConnections a new connection is closed at once, before a byte of HTTP/2, and onCut hears it", async () => {
      const cuts: string[] = [];
      const s = await serve({ maxConnections: 1, onCut: (scope, reason) => void cuts.push(`${scope}:${reason}`) });
      try {
        const first = await h2Peer(s.port);
        await first.waitFor("SETTINGS", (f) => f.type === FRAME.SETTINGS && !(f.flags & FLAG.ACK));
        const second = await h2Peer(s.port);
        await within("the second connection to close", second.closed);
        expect([second.frames, cuts]).toEqual([[], ["connection:max_connections"]]);
        first.headers(1, grpcRequestHeaders(s.port, RLS_PATH));
        first.data(1, validCall("under-the-cap"), true);
        await first.waitFor("the answer's trailers", (f) => f.type === FRAME.HEADERS && f.streamId === 1 && (f.flags & FLAG.END_STREAM) !== 0);
        first.destroy();
      } finally {
        await s.stop();
      }
    });
  });

  describe("reusePort", () => {
    it("a second server binds the same port with reusePort; the kernel spreads connections over both", async () => {
      const first = await serve({ reusePort: true });
      let second: Served | undefined;
      try {
        second = await serve({ reusePort: true, port: first.port });
        expect(second.port).toBe(first.port);
        for (let i = 0; i < 64 && (first.decided === 0 || second.decided === 0); i++) {
          const session = h2Session(first.port);
          expect((await h2Call(session, { body: validCall(`reuse${i}`) }).closed).grpcStatus).toBe(GRPC.OK);
          await closeSession(session);
        }
        expect([first.decided > 0, second.decided > 0]).toEqual([true, true]);
      } finally {
        await second?.stop();
        await first.stop();
      }
    });
  });

  describe("keepalive", () => {
    let s: Served;
    beforeAll(async () => {
      s = await serve({ keepalive: KEEPALIVE });
    });
    afterAll(async () => {
      await s?.stop();
    });

    it("a client PING is acknowledged with its payload", async () => {
      const session = h2Session(s.port);
      try {
        await connected(session);
        const payload = Buffer.from("sluice:)");
        const echoed = await new Promise<Buffer>((resolve, reject) => session.ping(payload, (err, _ms, p) => (err ? reject(err) : resolve(p))));
        expect(echoed.equals(payload)).toBe(true);
      } finally {
        await closeSession(session);
      }
    });

    it("the server PINGs an idle connection: a peer that acknowledges keeps it, one that does not is closed after timeoutMs", async () => {
      const session = h2Session(s.port);
      const silent = await h2Peer(s.port, { answerPings: false });
      try {
        // node's client acknowledges every PING: a second PING shows the connection outlived the first timeout.
        let pings = 0;
        await within("two server PINGs on an idle node:http2 session", new Promise<void>((resolve) => session.on("ping", () => ++pings === 2 && resolve())));
        const ping = await silent.waitFor("a server PING", (f) => f.type === FRAME.PING && (f.flags & FLAG.ACK) === 0);
        expect(ping.payload.length).toBe(8);
        const closedAt = await within("the unresponsive peer's connection to close", silent.closed);
        // Waited for the acknowledgement (loosely: on a busy host the PING itself may reach the peer late).
        expect(closedAt - ping.at).toBeGreaterThanOrEqual(KEEPALIVE.timeoutMs / 3);
        expect(closedAt - ping.at).toBeLessThan(KEEPALIVE.timeoutMs + 5000);

        expect(session.destroyed).toBe(false);
        expect((await h2Call(session, { body: validCall("alive") }).closed).grpcStatus).toBe(GRPC.OK);
      } finally {
        silent.destroy();
        await closeSession(session);
      }
    });
  });
  describe("max connection age", () => {
    const AGE = { ageMs: 1000, graceMs: 1000 };

    it("an old connection gets GOAWAY NO_ERROR; its call in flight is answered within the grace; then it closes", async () => {
      const s = await serve({ maxConnectionAge: AGE });
      try {
        s.store.hold();
        const peer = await h2Peer(s.port);
        peer.headers(1, grpcRequestHeaders(s.port, RLS_PATH));
        peer.data(1, validCall("aged"), true);
        await s.store.whenWaiting(1);
        const goaway = await peer.waitFor("GOAWAY", (f) => f.type === FRAME.GOAWAY);
        expect(goawayCode(goaway)).toBe(H2_ERROR.NO_ERROR);
        // Jitter takes up to 10 % off the age; a busy host only makes it later.
        expect(goaway.at).toBeGreaterThanOrEqual(AGE.ageMs * 0.9 - 50); // ms since the peer connected
        s.store.release();
        await peer.waitFor("stream 1's trailers", (f) => f.type === FRAME.HEADERS && f.streamId === 1 && (f.flags & FLAG.END_STREAM) !== 0);
        const data = peer.frames.filter((f) => f.type === FRAME.DATA && f.streamId === 1).map((f) => f.payload);
        expect(isOkResponse(Buffer.concat(data))).toBe(true);
        await within("the aged connection to close", peer.closed, AGE.graceMs + 10_000);
        peer.destroy();
      } finally {
        await s.stop();
      }
    });

    it("a call still held when the grace ends loses its connection; the server keeps serving new ones", async () => {
      const s = await serve({ maxConnectionAge: AGE });
      try {
        s.store.hold();
        const peer = await h2Peer(s.port);
        peer.headers(1, grpcRequestHeaders(s.port, RLS_PATH));
        peer.data(1, validCall("held-past-grace"), true);
        await s.store.whenWaiting(1);
        const goaway = await peer.waitFor("GOAWAY", (f) => f.type === FRAME.GOAWAY);
        const closedAt = await within("the connection to be closed after the grace", peer.closed, AGE.graceMs + 10_000);
        expect(closedAt - goaway.at).toBeGreaterThanOrEqual(AGE.graceMs * 0.5);
        const answered = peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === 1);
        expect(answered).toBe(false);
        s.store.release();
        const session = h2Session(s.port);
        try {
          expect((await h2Call(session, { body: validCall("fresh") }).closed).grpcStatus).toBe(GRPC.OK);
        } finally {
          await closeSession(session);
        }
        peer.destroy();
      } finally {
        await s.stop();
      }
    });
  });
});
