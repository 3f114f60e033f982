// sluice's own gRPC transport on node:http2 (a StartTransport, server/grpc-contract.ts):
// RateLimitService.ShouldRateLimit and grpc.health.v1 Check / Watch on one port, gRPC over HTTP/2 as
// grpc/grpc doc/PROTOCOL-HTTP2.md says. This file is the server's life: its HTTP/2 settings, its
// connections, and the drain at shutdown. The calls are in unary-call.ts, the Watch streams in
// health-watch.ts, the defences against slow clients in slow-peers.ts, streaming services in stream-calls.ts.
import http2 from "node:http2";
import type net from "node:net";
import type { Logger } from "pino";
import type { Limiter } from "../../../limiter/limiter.js";
import {
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_KEEPALIVE,
  DEFAULT_MAX_CONCURRENT_STREAMS,
  DEFAULT_WRITE_TIMEOUT_MS,
  type RunningTransport,
  type StartTransport,
  type TransportOptions,
} from "../grpc-contract.js";
import { limitSessionAge } from "./connection-age.js";
import { HealthWatch } from "./health-watch.js";
import { keepSessionAlive } from "./keepalive.js";
import { connOf, SlowPeers } from "./slow-peers.js";
import { StreamCalls } from "./stream-calls.js";
import { onCallClose } from "./call.js";
import { UnaryCalls } from "./unary-call.js";

/**
 * SETTINGS_MAX_HEADER_LIST_SIZE: Envoy's rate-limit calls carry a few hundred bytes of headers. What
 * well-behaved peers are told; node itself refuses (REFUSED_STREAM) header lists over 64 KiB.
 */
const MAX_HEADER_LIST_BYTES = 16 * 1024;
/** A TLS handshake not done by then is dropped (node's default is 120 s). */
const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;
/** After the grace period, how long sessions get to send their RST_STREAMs before their sockets go. */
const FINAL_FRAMES_MS = 100;

export const startH2Server: StartTransport = async (limiter, o) => {
  const t = new H2Transport(limiter, o);
  const port = await t.listen();
  return {
    port,
    setServing: (serving) => t.setServing(serving),
    shutdown: (graceMs) => t.shutdown(graceMs),
  } satisfies RunningTransport;
};

class H2Transport {
  readonly server: http2.Http2Server | http2.Http2SecureServer;
  private readonly logger: Logger;
  private stopping: Promise<boolean> | undefined;
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private readonly sockets = new Set<net.Socket>();
  private readonly stopTlsReload: (() => void) | undefined;
  private readonly slow: SlowPeers;
  private readonly health = new HealthWatch();
  private readonly calls: UnaryCalls;
  /** Streaming services (TransportOptions.streams): their calls live in stream-calls.ts. */
  private readonly streamCalls: StreamCalls | undefined;

  constructor(
    limiter: Limiter,
    private readonly o: TransportOptions,
  ) {
    this.logger = o.logger;
    const maxConcurrentStreams = o.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS;
    const onCut = o.onCut ?? noCut;
    this.slow = new SlowPeers({
      bodyTimeoutMs: o.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS,
      writeTimeoutMs: o.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS,
      maxMessageBytes: o.maxMessageBytes,
      maxConcurrentStreams,
      onCut,
      onSlowBody: (call) => this.calls.cutSlowBody(call),
      onStreamClose: onCallClose,
      debug: (fields, message) => o.logger.debug(fields, message),
    });
    this.calls = new UnaryCalls(
      { limiter, logger: o.logger, observer: o.observer, tracing: o.tracing, maxMessageBytes: o.maxMessageBytes, bounds: o.bounds },
      this.slow,
      this.health,
    );
    const keepalive = o.keepalive ?? DEFAULT_KEEPALIVE;
    this.streamCalls = o.streams && o.streams.length > 0 ? new StreamCalls(o.streams, o.maxMessageBytes, o.logger) : undefined;

    const options: http2.SecureServerOptions = {
      settings: {
        maxConcurrentStreams,
        maxHeaderListSize: MAX_HEADER_LIST_BYTES,
        enablePush: false,
      },
      // Memory node's HTTP/2 layer holds per connection (header tables, stream state, request DATA on its
      // way to JS, answers queued for a peer that does not read), in MB; past it, new streams are refused
      // with ENHANCE_YOUR_CALM. 1000 concurrent small calls fit easily; about 30 concurrent 1 MiB uploads
      // on one connection do not. (peerMaxConcurrentStreams bounds only streams this server would open,
      // and push is off, so node's default stands.)
      maxSessionMemory: 32,
    };
    const tls = o.tls;
    if (tls) {
      const secure = http2.createSecureServer({
        ...options,
        ...tls.secureContextOptions(),
        allowHTTP1: false,
        ALPNProtocols: ["h2"],
        handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS,
      });
      this.stopTlsReload = tls.onChange(() => {
        const next = tls.secureContextOptions();
        secure.setSecureContext({ cert: next.cert, key: next.key, ca: next.ca });
      });
      this.server = secure;
    } else {
      this.server = http2.createServer(options);
    }
    const server = this.server;
    if (o.maxConnections !== undefined) {
      // net.Server closes a connection past the cap as it is accepted, before TLS or HTTP/2 cost anything.
      server.maxConnections = o.maxConnections;
      server.on("drop", () => onCut("connection", "max_connections"));
    }
    server.on("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => this.onStream(stream, headers));
    server.on("session", (session: http2.ServerHttp2Session) => {
      this.sessions.add(session);
      session.once("close", () => this.sessions.delete(session));
      this.slow.attach(session);
      keepSessionAlive(session, keepalive);
      if (o.maxConnectionAge) limitSessionAge(session, o.maxConnectionAge);
      if (this.stopping) session.close();
    });
    server.on("connection", (socket: net.Socket) => {
      this.sockets.add(socket);
      socket.once("close", () => this.sockets.delete(socket));
    });
    server.on("sessionError", (err: Error) => this.logger.debug({ err }, "HTTP/2 session error"));
  }

  listen(): Promise<number> {
    const server = this.server;
    return new Promise<number>((resolve, reject) => {
      const failed = (err: Error) => {
        this.close();
        reject(err);
      };
      server.once("error", failed);
      server.listen({ host: this.o.host, port: this.o.port, reusePort: this.o.reusePort === true }, () => {
        server.off("error", failed);
        // Later errors (e.g. accept failing with EMFILE) are logged; the server keeps listening.
        server.on("error", (err) => this.logger.error({ err }, "gRPC server error"));
        resolve((server.address() as net.AddressInfo).port);
      });
    });
  }

  setServing(serving: boolean): void {
    if (this.stopping) return;
    this.health.setServing(serving);
  }

  shutdown(graceMs: number): Promise<boolean> {
    this.stopping ??= this.drain(graceMs);
    return this.stopping;
  }

  private onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on("error", onStreamError);
    // Its connection's window holds back as many answers as it may: no work and no memory for another.
    const conn = connOf(stream);
    if (this.slow.refused(stream, conn)) return;
    if (this.streamCalls?.handles(headers[":path"])) return this.streamCalls.start(stream, headers);
    this.calls.start(stream, headers, conn);
  }

  private async drain(graceMs: number): Promise<boolean> {
    this.stopTlsReload?.();
    // Health watchers hear NOT_SERVING, then their streams end so they do not hold the shutdown.
    this.health.endAll();
    // Stop accepting; GOAWAY to every session: in-flight streams finish, new ones go elsewhere.
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sessions) s.close();
    this.streamCalls?.shutdown();
    const idle = this.calls.idle();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), graceMs);
    });
    const finished = await Promise.race([Promise.all([closed, idle]).then(() => true as const), expired]);
    clearTimeout(timer);
    if (!finished) this.calls.cutAll();
    this.close();
    return finished;
  }

  /** Everything still open goes: sessions closing on their own get a moment to send their last frames. */
  private close(): void {
    this.slow.stop();
    this.stopTlsReload?.();
    if (this.server.listening) this.server.close();
    if (this.sessions.size === 0 && this.sockets.size === 0) return;
    setTimeout(() => {
      for (const s of this.sessions) s.destroy();
      for (const s of this.sockets) s.destroy();
    }, FINAL_FRAMES_MS).unref();
  }
}

function noCut(): void {}

/** A peer's RST_STREAM with an error code, or a write after the peer went: the stream's 'close' follows. */
function onStreamError(): void {}
