// The h2 transport (src/server/grpc/h2/) over real sockets: a grpc-js client for the calls Envoy makes, a raw
// node:http2 client for the bytes and frames no well-behaved client sends, a real redis-server behind a
// gate that stalls it for deadlines and draining, and openssl-made certificates for TLS and mTLS.
import fs from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import * as grpc from "@grpc/grpc-js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Limiter } from "../../src/limiter/limiter.js";
import type { Decision, RateLimitRequest } from "../../src/limiter/types.js";
import { loadRuleDir } from "../../src/rules/load.js";
import { startH2Server } from "../../src/server/grpc/h2/server.js";
import { serverTls } from "../../src/server/grpc/tls.js";
import type { CallObserver, RunningTransport, TransportOptions } from "../../src/server/grpc/grpc-contract.js";
import { serveSettings } from "../../src/settings/settings.js";
import { MemoryStore } from "../../src/store/memory.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { certFactory, read, type CertFactory, type Pem } from "../helpers/certs.js";
import { descriptor, OK, OVER_LIMIT, retryAfter, rlsClient } from "../helpers/grpc-client.js";
import { GRPC } from "../conformance/harness.js";
import { h2Call, h2Session, RLS_PATH, type H2Answer, type H2CallOptions } from "../helpers/h2-call.js";
import { startRedisGate, type RedisGate } from "../helpers/redis-gate.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";
import { encodeRequest, grpcFrame, padTo } from "../../bench/lib/frame.mjs";

const RULES = `
domain: h2
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: big
    rate_limit: {unit: hour, requests_per_unit: 1000000}
`;
// gRPC status codes, written out once for the tests (conformance/harness.ts).
const S = GRPC;
const CAP = 4096;
const logger = pino({ level: "silent" });
const rules = () => loadRuleDir(ruleDir({ "rules.yaml": RULES }), { mergeDomains: false }).rules!;
const bounds = serveSettings([], {}).bounds;

/** Every observer call, in order. */
function recorder() {
  const calls: string[] = [];
  const observer: CallObserver = {
    decided: (_req: RateLimitRequest, d: Decision) => void calls.push(`decided ${d.code}`),
    failed: (code: string) => void calls.push(`failed ${code}`),
  };
  return { calls, observer };
}

const running: RunningTransport[] = [];
async function start(o: Partial<TransportOptions> = {}, limiter = new Limiter(rules(), new MemoryStore({}))) {
  const t = await startH2Server(limiter, { host: "127.0.0.1", port: 0, bounds, maxMessageBytes: CAP, logger, ...o });
  running.push(t);
  return t;
}
afterAll(async () => {
  for (const t of running) await t.shutdown(100);
});

type Raw = H2Answer;

/** One call on its own connection (or on `session`); `end: false` leaves the request open. */
async function raw(port: number, o: H2CallOptions & { session?: http2.ClientHttp2Session } = {}): Promise<Raw> {
  const session = o.session ?? h2Session(port);
  session.on("error", () => {});
  const r = await h2Call(session, o).closed;
  if (!o.session) session.close();
  return r;
}

const valid = (k = "k", v = "v") => grpcFrame(encodeRequest("h2", [[[k, v]]]));
const statusOf = (r: Raw) => Number((r.trailers ?? r.headers)?.["grpc-status"]);
const messageOf = (r: Raw) => decodeURIComponent(String((r.trailers ?? r.headers)?.["grpc-message"] ?? ""));

describe("calls from a grpc-js client", () => {
  it("ShouldRateLimit counts exactly and refuses with Retry-After and a JSON body; health Check", async () => {
    const { calls, observer } = recorder();
    const t = await start({ observer });
    const client = rlsClient(t.port);
    try {
      expect(await client.health("")).toBe(2); // NOT_SERVING until told
      t.setServing(true);
      expect(await client.health("")).toBe(1);
      expect(await client.health("envoy.service.ratelimit.v3.RateLimitService")).toBe(1);
      await expect(client.health("other")).rejects.toMatchObject({ code: S.NOT_FOUND, details: "unknown service other" });

      const codes = [];
      for (let i = 0; i < 4; i++) codes.push((await client.shouldRateLimit({ domain: "h2", descriptors: [descriptor({ k: "exact" })] })).overall_code);
      expect(codes).toEqual([OK, OK, OK, OVER_LIMIT]);
      const refused = await client.shouldRateLimit({ domain: "h2", descriptors: [descriptor({ k: "exact" })] });
      expect(refused.statuses).toEqual([
        {
          code: OVER_LIMIT,
          current_limit: { name: "", requests_per_unit: 3, unit: 3 /* HOUR */ },
          limit_remaining: 0,
          duration_until_reset: refused.statuses[0].duration_until_reset,
        },
      ]);
      expect(Number(retryAfter(refused))).toBeGreaterThan(0);
      expect(JSON.parse(refused.raw_body!.toString())).toEqual({ error: "rate_limited", retry_after_seconds: Number(retryAfter(refused)) });
      await expect(client.shouldRateLimit({ domain: "", descriptors: [descriptor({ k: "v" })] })).rejects.toMatchObject({
        code: S.INVALID_ARGUMENT,
        details: "domain must not be empty",
      });
      expect(calls).toEqual(["decided OK", "decided OK", "decided OK", "decided OVER_LIMIT", "decided OVER_LIMIT", "failed invalid_argument"]);
    } finally {
      client.close();
    }
  });

  it("Watch: the current status, each change, then NOT_SERVING and the end of the stream at shutdown", async () => {
    const t = await start();
    const client = rlsClient(t.port);
    const seen: number[] = [];
    const unknown: number[] = [];
    const ended = client.watchHealth("", (s) => seen.push(s));
    const unknownEnded = client.watchHealth("nope", (s) => unknown.push(s));
    await until(() => seen.length === 1 && unknown.length === 1);
    t.setServing(true);
    await until(() => seen.length === 2);
    t.setServing(true); // no change, nothing sent
    t.setServing(false);
    await until(() => seen.length === 3);
    t.setServing(true);
    await until(() => seen.length === 4);
    expect(await t.shutdown(5000)).toBe(true);
    await ended;
    await unknownEnded;
    expect(seen).toEqual([2, 1, 2, 1, 2]);
    expect(unknown).toEqual([3]);
    client.close();
  });
});

describe("on the wire", () => {
  let port: number;
  beforeAll(async () => {
    port = (await start()).port;
  });

  it("an answer is HEADERS, one message, trailers grpc-status 0; an error is one HEADERS frame with END_STREAM", async () => {
    const ok = await raw(port, { body: valid("big", "wire") });
    expect(ok.rawHeaders).toEqual([":status", "200", "content-type", "application/grpc", "grpc-accept-encoding", "identity"]);
    expect([Object.keys(ok.trailers!), ok.trailers!["grpc-status"]]).toEqual([["grpc-status"], "0"]);
    expect(ok.data[0]).toBe(0);
    expect(ok.data.readUInt32BE(1)).toBe(ok.data.length - 5);
    expect(ok.rstCode).toBe(0);

    const bad = await raw(port, { body: grpcFrame(encodeRequest("", [[["k", "v"]]])) });
    expect(bad.rawHeaders).toEqual([
      ":status",
      "200",
      "content-type",
      "application/grpc",
      "grpc-accept-encoding",
      "identity",
      "grpc-status",
      "3",
      "grpc-message",
      "domain must not be empty",
    ]);
    expect(bad.trailers).toBeUndefined();
    expect(bad.data.length).toBe(0);
  });

  it("not gRPC: 405 for a method other than POST, 415 for another content-type; gRPC content-types with parameters pass", async () => {
    const get = await raw(port, { headers: { ":method": "GET" } });
    expect([get.headers?.[":status"], get.headers?.allow, get.headers?.["grpc-status"]]).toEqual([405, "POST", undefined]);
    for (const ct of ["text/plain", "application/grpc+json", "application/grpcx"]) {
      const r = await raw(port, { headers: { "content-type": ct }, body: valid() });
      expect([ct, r.headers?.[":status"], r.headers?.["grpc-status"]]).toEqual([ct, 415, undefined]);
    }
    const noType = await raw(port, { headers: { "content-type": undefined }, body: valid() });
    expect(noType.headers?.[":status"]).toBe(415);
    for (const ct of ["application/grpc+proto", "Application/GRPC; charset=utf-8"]) {
      const r = await raw(port, { headers: { "content-type": ct }, body: valid("big", "ct") });
      expect([ct, statusOf(r)]).toEqual([ct, S.OK]);
    }
  });

  it("unknown method: UNIMPLEMENTED, its path percent-encoded in grpc-message", async () => {
    const r = await raw(port, { path: "/pkg.Svc/50%off", body: valid() });
    expect(statusOf(r)).toBe(S.UNIMPLEMENTED);
    expect(r.headers?.["grpc-message"]).toBe("unknown method /pkg.Svc/50%25off");
    expect(messageOf(r)).toBe("unknown method /pkg.Svc/50%off");
  });

  it("compression: a grpc-encoding other than identity is UNIMPLEMENTED naming it; the compressed flag under identity is INTERNAL", async () => {
    const gzip = await raw(port, { headers: { "grpc-encoding": "gzip" }, body: grpcFrame(Buffer.from("junk"), { compressed: true }) });
    expect([statusOf(gzip), messageOf(gzip), gzip.headers?.["grpc-accept-encoding"]]).toEqual([
      S.UNIMPLEMENTED,
      "grpc-encoding gzip is not supported (this server accepts identity only)",
      "identity",
    ]);
    const flagged = await raw(port, { body: grpcFrame(encodeRequest("h2", [[["k", "v"]]]), { compressed: true }) });
    expect([statusOf(flagged), messageOf(flagged)]).toEqual([
      S.INTERNAL,
      "Received a compressed message, but the call's grpc-encoding is identity (this server accepts identity only)",
    ]);
    const identity = await raw(port, { headers: { "grpc-encoding": "identity" }, body: valid("big", "id") });
    expect(statusOf(identity)).toBe(S.OK);
  });

  it("one message per call: none, two, a truncated one or stray bytes after it is UNIMPLEMENTED (a request cardinality violation)", async () => {
    const m = valid("big", "card");
    const cases: [Buffer[], string][] = [
      [[], "Received no request message"],
      [[m, m], "Received a second request message for a unary call"],
      [[m, Buffer.from([0])], "Received 1 stray byte after the request message (not a message: a prefix is 5 bytes)"],
      [[m, Buffer.from([0, 0, 0, 0])], "Received 4 stray bytes after the request message (not a message: a prefix is 5 bytes)"],
      [[m, Buffer.from([0, 0, 0, 0, 0])], "Received a second request message for a unary call"],
      [[m.subarray(0, 3)], "Received no request message: the body ended inside a message (3 of the 5 prefix bytes)"],
      [[m.subarray(0, m.length - 2)], `Received no request message: the body ended inside a message (${m.length - 7} of its ${m.length - 5} bytes)`],
    ];
    for (const [body, message] of cases) {
      const r = await raw(port, { body });
      expect([statusOf(r), messageOf(r)]).toEqual([S.UNIMPLEMENTED, message]);
    }
    // Split anywhere, byte by byte included, the message is whole.
    const split = await raw(port, { body: [...m].map((b) => Buffer.from([b])) });
    expect(statusOf(split)).toBe(S.OK);
    const empty = await raw(port, { body: grpcFrame(Buffer.alloc(0)) });
    expect([statusOf(empty), messageOf(empty)]).toEqual([S.INVALID_ARGUMENT, "domain must not be empty"]);
  });

  it("a message over the cap is refused from its prefix: the answer comes while the body is still being sent", async () => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    const stream = session.request({ ":method": "POST", ":path": RLS_PATH, "content-type": "application/grpc", te: "trailers" });
    stream.write(grpcFrame(Buffer.alloc(10), { length: CAP + 1 }));
    const h = await new Promise<http2.IncomingHttpHeaders>((resolve) => stream.once("response", resolve));
    expect([Number(h["grpc-status"]), h["grpc-message"], stream.writableEnded]).toEqual([
      S.RESOURCE_EXHAUSTED,
      `Received message larger than max (${CAP + 1} vs ${CAP})`,
      false,
    ]);
    // The rest of the body is read and dropped: the client can finish sending, and the stream closes cleanly.
    stream.end(Buffer.alloc(64 * 1024));
    await new Promise((r) => stream.once("close", r));
    expect(stream.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    session.close();
    const atCap = await raw(port, { body: grpcFrame(padTo(encodeRequest("h2", [[["big", "cap"]]]), CAP)) });
    expect(statusOf(atCap)).toBe(S.OK);
  });

  it("bad prefix flags and grpc-timeout values: INTERNAL with a message", async () => {
    const flags = await raw(port, { body: Buffer.concat([Buffer.from([2, 0, 0, 0, 0])]) });
    expect([statusOf(flags), messageOf(flags)]).toEqual([S.INTERNAL, "malformed message prefix: flags byte 2, expected 0 or 1"]);
    for (const timeout of ["1", "123456789S", "10x", "-1S", "1.5S"]) {
      const r = await raw(port, { headers: { "grpc-timeout": timeout }, body: valid() });
      expect([timeout, statusOf(r), messageOf(r)]).toEqual([timeout, S.INTERNAL, `invalid grpc-timeout ${timeout}`]);
    }
    const longest = await raw(port, { headers: { "grpc-timeout": "99999999H" }, body: valid("big", "t") });
    expect(statusOf(longest)).toBe(S.OK);
  });

  // node enforces its own 64 KiB bound on a received header list; 16 KiB is what well-behaved peers are told.
  it("advertises SETTINGS_MAX_CONCURRENT_STREAMS and a header list bound; a header list over 64 KiB is refused", async () => {
    const t = await start({ maxConcurrentStreams: 7 });
    const session = http2.connect(`http://127.0.0.1:${t.port}`);
    await new Promise((r) => session.once("remoteSettings", r));
    expect([session.remoteSettings.maxConcurrentStreams, session.remoteSettings.maxHeaderListSize]).toEqual([7, 16384]);
    const big = await raw(t.port, { headers: { "x-big": "a".repeat(70_000) }, body: valid() });
    expect(big.headers).toBeUndefined();
    expect(big.rstCode).toBe(http2.constants.NGHTTP2_REFUSED_STREAM);
    expect(statusOf(await raw(t.port, { session, body: valid("big", "s") }))).toBe(S.OK);
    session.close();
  });
});

describe("timeouts", () => {
  let redis: RedisProcess;
  let gate: RedisGate;
  let store: RedisStore;
  beforeAll(async () => {
    redis = await startRedis();
    gate = await startRedisGate(redis.port);
    store = new RedisStore({ servers: [{ host: "127.0.0.1", port: gate.port }], timeoutMs: 30_000, logger });
    await store.start();
  });
  afterAll(async () => {
    gate?.release();
    await store?.close();
    await gate?.close();
    await redis?.stop();
  });

  it("grpc-timeout: DEADLINE_EXCEEDED on time while the store stalls; the observer hears the decision once it comes", async () => {
    const { calls, observer } = recorder();
    const t = await start({ observer }, new Limiter(rules(), store));
    expect(statusOf(await raw(t.port, { body: valid("big", "warm") }))).toBe(S.OK);
    gate.hold();
    const before = gate.scriptCalls();
    const r = await raw(t.port, { headers: { "grpc-timeout": "200m" }, body: valid("big", "late") });
    expect([statusOf(r), messageOf(r)]).toEqual([S.DEADLINE_EXCEEDED, "Deadline exceeded"]);
    expect(r.ms).toBeGreaterThanOrEqual(195);
    expect(r.ms).toBeLessThan(2000);
    expect(gate.scriptCalls()).toBe(before + 1); // it reached the store: its hit counts
    expect(calls).toEqual(["decided OK"]);
    gate.release();
    await until(() => calls.length === 2);
    expect(calls).toEqual(["decided OK", "decided OK"]);

    // A deadline that passes while the body is still coming: the limiter never sees the call.
    const slow = await raw(t.port, { headers: { "grpc-timeout": "100000u" }, body: valid().subarray(0, 8), end: false });
    expect(statusOf(slow)).toBe(S.DEADLINE_EXCEEDED);
    expect(calls).toEqual(["decided OK", "decided OK", "failed deadline_exceeded"]);
    const zero = await raw(t.port, { headers: { "grpc-timeout": "0n" }, body: valid("big", "zero") });
    expect(statusOf(zero)).toBe(S.DEADLINE_EXCEEDED);
  });

  it("a request body that does not end within bodyTimeoutMs: RST_STREAM CANCEL; the connection serves on", async () => {
    const { calls, observer } = recorder();
    const t = await start({ observer, bodyTimeoutMs: 300 });
    const session = http2.connect(`http://127.0.0.1:${t.port}`);
    const r = await raw(t.port, { session, body: valid().subarray(0, 9), end: false });
    expect(r.headers).toBeUndefined();
    expect(r.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    expect(r.ms).toBeGreaterThanOrEqual(295);
    expect(r.ms).toBeLessThan(3000);
    // Headers only, no END_STREAM: cut too.
    const headersOnly = await raw(t.port, { session, end: false });
    expect(headersOnly.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    // Answered early (over the cap) but the body never ends: the answer stands, the stream is cut later.
    const early = await raw(t.port, { session, body: grpcFrame(Buffer.alloc(10), { length: CAP + 1 }), end: false });
    expect([statusOf(early), early.rstCode]).toEqual([S.RESOURCE_EXHAUSTED, http2.constants.NGHTTP2_CANCEL]);
    expect(early.ms).toBeGreaterThanOrEqual(295);
    expect(statusOf(await raw(t.port, { session, body: valid("big", "after") }))).toBe(S.OK);
    expect(calls).toEqual(["failed cancelled", "failed cancelled", "failed resource_exhausted", "decided OK"]);
    session.close();
  });

  it("keepalive: an idle connection is pinged and kept while it answers; one that does not answer is closed", async () => {
    const t = await start({ keepalive: { intervalMs: 200, timeoutMs: 300 } });
    const session = http2.connect(`http://127.0.0.1:${t.port}`);
    let pings = 0;
    session.on("ping", () => pings++);
    expect(statusOf(await raw(t.port, { session, body: valid("big", "ka") }))).toBe(S.OK);
    await until(() => pings >= 2, 5000);
    expect(session.destroyed).toBe(false);
    expect(statusOf(await raw(t.port, { session, body: valid("big", "ka") }))).toBe(S.OK);
    session.close();

    // A TCP peer that never speaks HTTP/2, so never acknowledges: gone after about interval + timeout.
    const started = performance.now();
    const socket = net.connect(t.port, "127.0.0.1");
    socket.on("error", () => {});
    socket.resume();
    await new Promise((r) => socket.once("close", r));
    const ms = performance.now() - started;
    expect(ms).toBeGreaterThanOrEqual(450);
    expect(ms).toBeLessThan(5000);
  });
});

describe("shutdown", () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  async function behindGate() {
    const gate = await startRedisGate(redis.port);
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: gate.port }], timeoutMs: 30_000, logger });
    await store.start();
    const t = await start({}, new Limiter(rules(), store));
    const session = http2.connect(`http://127.0.0.1:${t.port}`);
    expect(statusOf(await raw(t.port, { session, body: valid("big", "warm") }))).toBe(S.OK);
    const done = async () => {
      session.close();
      gate.release();
      await store.close();
      await gate.close();
    };
    return { gate, store, t, session, done };
  }

  it("GOAWAY, new connections refused, in-flight calls answered; true when all finished in time", async () => {
    const { gate, t, session, done } = await behindGate();
    gate.hold();
    const before = gate.scriptCalls();
    const inFlight = Array.from({ length: 5 }, (_, i) => raw(t.port, { session, body: valid("big", `f${i}`) }));
    await until(() => gate.scriptCalls() === before + 5);
    let goaway = false;
    session.once("goaway", () => (goaway = true));
    const stopped = t.shutdown(10_000);
    await until(() => goaway);
    const refused = await new Promise<string>((resolve) => {
      const s = net.connect(t.port, "127.0.0.1");
      s.on("connect", () => resolve("connected"));
      s.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
    });
    expect(refused).toBe("ECONNREFUSED");
    gate.release();
    expect((await Promise.all(inFlight)).map(statusOf)).toEqual([0, 0, 0, 0, 0]);
    expect(await stopped).toBe(true);
    await done();
  });

  it("calls that outlive graceMs are cut and shutdown resolves false", async () => {
    const { gate, t, session, done } = await behindGate();
    gate.hold();
    const inFlight = raw(t.port, { session, body: valid("big", "hung") });
    const before = gate.scriptCalls();
    await until(() => gate.scriptCalls() === before + 1);
    const started = performance.now();
    expect(await t.shutdown(300)).toBe(false);
    expect(performance.now() - started).toBeLessThan(3000);
    const r = await inFlight;
    expect(r.headers).toBeUndefined();
    await done();
  });
});

describe("TLS and mTLS with certificate reload", () => {
  let certs: CertFactory;
  let caA: Pem;
  let caB: Pem;
  beforeAll(() => {
    certs = certFactory();
    caA = certs.ca("ca-a");
    caB = certs.ca("ca-b");
  });

  const callWith = async (port: number, creds: grpc.ChannelCredentials) => {
    const client = rlsClient(port, creds);
    try {
      return (await client.shouldRateLimit({ domain: "h2", descriptors: [descriptor({ big: "tls" })] }, 3000)).overall_code;
    } catch (err) {
      return `error ${(err as grpc.ServiceError).code}`;
    } finally {
      client.close();
    }
  };
  const trusting = (ca: Pem, client?: Pem) =>
    client ? grpc.credentials.createSsl(read(ca.cert), read(client.key), read(client.cert)) : grpc.credentials.createSsl(read(ca.cert));
  const live = (name: string, server: Pem, ca?: Pem) => {
    const f = {
      certFile: `${certs.dir}/${name}.pem`,
      keyFile: `${certs.dir}/${name}.key`,
      caFile: ca ? `${certs.dir}/${name}-ca.pem` : undefined,
      reloadMs: 50,
    };
    fs.copyFileSync(server.cert, f.certFile);
    fs.copyFileSync(server.key, f.keyFile);
    if (ca) fs.copyFileSync(ca.cert, f.caFile!);
    return f;
  };

  it("TLS: h2 by ALPN; a client trusting the CA is answered, plaintext and other CAs are not; a new certificate serves without restart", async () => {
    const files = live("tls", certs.issue(caA, "server-a", "server"));
    const tls = serverTls(files, logger);
    const t = await start({ tls });
    expect(await callWith(t.port, trusting(caA))).toBe(OK);
    expect(await callWith(t.port, grpc.credentials.createInsecure())).toBe(`error ${S.UNAVAILABLE}`);
    expect(await callWith(t.port, trusting(caB))).toBe(`error ${S.UNAVAILABLE}`);

    const next = certs.issue(caB, "server-b", "server");
    fs.copyFileSync(next.key, files.keyFile);
    fs.copyFileSync(next.cert, files.certFile);
    await until(async () => (await callWith(t.port, trusting(caB))) === OK, 5000);
    expect(await callWith(t.port, trusting(caA))).toBe(`error ${S.UNAVAILABLE}`);
    tls.close();
  });

  it("mTLS: a client certificate from the CA is required; a new CA bundle applies without restart", async () => {
    const clientA = certs.issue(caA, "client-a", "client");
    const clientB = certs.issue(caB, "client-b", "client");
    const files = live("mtls", certs.issue(caA, "server-m", "server"), caA);
    const tls = serverTls(files, logger);
    const t = await start({ tls });
    expect(await callWith(t.port, trusting(caA, clientA))).toBe(OK);
    expect(await callWith(t.port, trusting(caA))).toBe(`error ${S.UNAVAILABLE}`);
    expect(await callWith(t.port, trusting(caA, clientB))).toBe(`error ${S.UNAVAILABLE}`);

    fs.copyFileSync(caB.cert, files.caFile!);
    await until(async () => (await callWith(t.port, trusting(caA, clientB))) === OK, 5000);
    expect(await callWith(t.port, trusting(caA, clientA))).toBe(`error ${S.UNAVAILABLE}`);
    tls.close();
  });
});

describe("reusePort", () => {
  it("two servers share a port with reusePort; without it the second bind fails", async () => {
    const a = await start({ reusePort: true });
    const b = await start({ reusePort: true, port: a.port });
    expect(b.port).toBe(a.port);
    await expect(start({ port: a.port })).rejects.toMatchObject({ code: "EADDRINUSE" });
    expect(statusOf(await raw(a.port, { body: valid("big", "rp") }))).toBe(S.OK);
  });
});
