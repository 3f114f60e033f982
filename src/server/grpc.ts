// The gRPC transport: RateLimitService and grpc.health.v1. Decode, bound-check, map errors; no logic.
import http2 from "node:http2";
import net from "node:net";
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { Limiter } from "../limiter/limiter.js";
import { toWireResponse, type WireResponse } from "./wire-response.js";
import { InvalidRequestError, type Decision, type RateLimitRequest } from "../limiter/types.js";
import { StoreUnavailableError } from "../store/store.js";
import { decodeRequest, type RequestBounds, type WireRequest } from "./decode.js";
import { gateStreams, injectedHttp2Server } from "./grpc-js-gate.js";
import { refusal } from "./grpc-refusals.js";
import { loadProtos } from "./protos.js";
import { checkRequestWire, RejectedRequest } from "./wire-guard.js";
import {
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_KEEPALIVE,
  DEFAULT_MAX_CONCURRENT_STREAMS,
  isHealthService,
  RLS_SERVICE,
  type CallObserver,
  type HeaderGetter,
  type RunningTransport,
  type TracedCall,
  type TransportOptions,
} from "./transport.js";

export { RLS_SERVICE };
export type { CallObserver };
/** The grpc-js transport takes the common options (transport.ts). */
export type GrpcServerOptions = TransportOptions;

export interface RunningGrpcServer extends RunningTransport {
  server: grpc.Server;
}

const HEALTH = { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } as const;

interface Watcher {
  call: grpc.ServerWritableStream<{ service?: string }, unknown>;
  /** Watching the server ("") or the RLS service; false = an unknown service (SERVICE_UNKNOWN, no updates). */
  known: boolean;
  last: number;
}

export async function startGrpcServer(limiter: Limiter, o: TransportOptions): Promise<RunningGrpcServer> {
  const protos = loadProtos();
  const keepalive = o.keepalive ?? DEFAULT_KEEPALIVE;
  const server = new grpc.Server({
    "grpc.max_receive_message_length": o.maxMessageBytes,
    "grpc.max_send_message_length": o.maxMessageBytes,
    "grpc.max_concurrent_streams": o.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS,
    "grpc.keepalive_time_ms": keepalive.intervalMs,
    "grpc.keepalive_timeout_ms": keepalive.timeoutMs,
    // grpc-js applies its own +-10 % jitter to the age.
    ...(o.maxConnectionAge ? { "grpc.max_connection_age_ms": o.maxConnectionAge.ageMs, "grpc.max_connection_age_grace_ms": o.maxConnectionAge.graceMs } : {}),
  });
  let serving = false;
  const watchers = new Set<Watcher>();

  // One async function per call, no closures made per call; it settles only by answering.
  const unexpected = (err: unknown) => o.logger.error({ err }, "ShouldRateLimit failed after answering");
  const rls = guardDecoding(protos.rls, o.bounds);
  server.addService(rls, {
    ShouldRateLimit(call: grpc.ServerUnaryCall<WireRequest | RejectedRequest, unknown>, callback: grpc.sendUnaryData<unknown>) {
      const tracing = o.tracing;
      const traced = tracing === undefined ? undefined : tracing.begin(call.metadata, METADATA_GETTER);
      answer(limiter, o, call.request, callback, traced).catch(unexpected);
    },
  });

  const isKnown = isHealthService;
  const current = () => (serving ? HEALTH.SERVING : HEALTH.NOT_SERVING);
  const tell = (w: Watcher, status: number) => {
    if (w.last === status) return; // grpc.health.v1: Watch sends changes only
    w.last = status;
    w.call.write({ status });
  };

  server.addService(protos.health, {
    Check(call: grpc.ServerUnaryCall<{ service?: string }, unknown>, callback: grpc.sendUnaryData<unknown>) {
      const service = call.request.service ?? "";
      if (!isKnown(service)) callback({ code: grpc.status.NOT_FOUND, details: refusal.unknownHealthService(service) });
      else callback(null, { status: current() });
    },
    Watch(call: grpc.ServerWritableStream<{ service?: string }, unknown>) {
      const known = isKnown(call.request.service ?? "");
      const w: Watcher = { call, known, last: -1 };
      tell(w, known ? current() : HEALTH.SERVICE_UNKNOWN);
      watchers.add(w);
      call.on("cancelled", () => watchers.delete(w));
      call.on("close", () => watchers.delete(w));
    },
  });

  // Connections are accepted here and handed to grpc-js (its bindAsync cannot set SO_REUSEPORT);
  // the gate checks each stream before grpc-js handles it (server/grpc-js-gate.ts).
  const credentials = o.tls?.credentials ?? grpc.ServerCredentials.createInsecure();
  let injector!: grpc.ConnectionInjector;
  const h2 = injectedHttp2Server(server, () => (injector = server.createConnectionInjector(credentials)));
  const paths = new Set<string>([rls, protos.health].flatMap((d) => Object.values(d).map((m) => m.path)));
  gateStreams(h2, { paths, bodyTimeoutMs: o.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS });
  const sessions = sessionDrain(h2);
  const listener = net.createServer({ noDelay: true }, (socket) => {
    socket.on("error", () => {}); // a reset before HTTP/2 takes the socket over is no one's business
    injector.injectConnection(socket);
  });
  if (o.maxConnections !== undefined) {
    // Past the cap a connection is closed as it is accepted. (The h2 transport's bounds on unwritten answers
    // are not here: grpc-js writes them itself.)
    listener.maxConnections = o.maxConnections;
    const onCut = o.onCut;
    listener.on("drop", () => onCut?.("connection", "max_connections"));
  }
  let port: number;
  try {
    port = await listen(listener, o);
  } catch (err) {
    injector.destroy();
    server.forceShutdown();
    throw err;
  }
  // An accept that fails (e.g. EMFILE) is logged; the listener keeps accepting.
  listener.on("error", (err) => o.logger.error({ err }, "gRPC listener error"));

  return {
    port,
    server,
    setServing(value: boolean) {
      serving = value;
      for (const w of watchers) if (w.known) tell(w, current());
    },
    shutdown(graceMs: number) {
      serving = false;
      listener.close(); // new connections are refused from now on
      // Health watchers hear NOT_SERVING, then their streams end so they do not hold the shutdown.
      for (const w of watchers) {
        if (w.known) tell(w, HEALTH.NOT_SERVING);
        w.call.end();
      }
      watchers.clear();
      // grpc-js's tryShutdown cannot be trusted to wait here: with injected connections its HTTP/2
      // server counts none, and on Node 24 closing that server marks the sessions closed, so it calls
      // back while calls are still in flight. The sessions are drained here instead.
      return sessions.drain(graceMs).then((drained) => {
        server.forceShutdown();
        return drained;
      });
    },
  };
}

/** The HTTP/2 sessions of `h2`, and their graceful close. */
function sessionDrain(h2: http2.Http2Server | http2.Http2SecureServer) {
  const sessions = new Set<http2.ServerHttp2Session>();
  let draining = false;
  let gone: (() => void) | undefined;
  (h2 as http2.Http2Server).on("session", (session) => {
    sessions.add(session);
    session.once("close", () => {
      sessions.delete(session);
      gone?.();
    });
    if (draining) session.close(); // its TLS handshake ended after the drain began
  });
  return {
    /**
     * GOAWAY on every session: no new streams, and each closes once its calls are answered. True when
     * all closed within graceMs; otherwise the rest are cut (GOAWAY CANCEL: their calls are cancelled).
     */
    drain(graceMs: number): Promise<boolean> {
      draining = true;
      return new Promise<boolean>((resolve) => {
        const force = setTimeout(() => {
          const cut = new Error(`shutdown grace period of ${graceMs} ms ended`);
          for (const session of sessions) session.destroy(cut, http2.constants.NGHTTP2_CANCEL);
          gone = undefined;
          resolve(false);
        }, graceMs);
        force.unref();
        gone = () => {
          if (sessions.size > 0) return;
          clearTimeout(force);
          gone = undefined;
          resolve(true);
        };
        for (const session of sessions) session.close();
        gone();
      });
    },
  };
}

/** Binds the listening socket; SO_REUSEPORT when asked (net's reusePort: Node >= 22.12 / 23.1, Linux and BSDs). */
function listen(listener: net.Server, o: TransportOptions): Promise<number> {
  if (o.reusePort && !netHasReusePort()) {
    return Promise.reject(new Error(`reusePort needs Node 22.12 or later (this is ${process.version})`));
  }
  return new Promise<number>((resolve, reject) => {
    listener.once("error", reject);
    const options: net.ListenOptions & { reusePort?: boolean } = { host: o.host, port: o.port, reusePort: o.reusePort === true };
    listener.listen(options, () => {
      listener.removeListener("error", reject);
      resolve((listener.address() as net.AddressInfo).port);
    });
  });
}

function netHasReusePort(): boolean {
  const [major, minor] = process.versions.node.split(".").map(Number);
  return major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

/** Decode, decide, answer; any error becomes its gRPC status. The observer (and the trace) hear of every call. */
async function answer(
  limiter: Limiter,
  o: TransportOptions,
  request: WireRequest | RejectedRequest,
  callback: grpc.sendUnaryData<unknown>,
  traced: TracedCall | undefined,
): Promise<void> {
  const observer = o.observer;
  const started = observer || traced ? performance.now() : 0;
  let req: RateLimitRequest | undefined;
  let decision: Decision;
  let response: WireResponse;
  try {
    if (request instanceof RejectedRequest) throw new InvalidRequestError(request.message);
    req = decodeRequest(request, o.bounds);
    decision = await (traced === undefined ? limiter.shouldRateLimit(req) : decideTraced(traced, limiter, req));
    response = toWireResponse(decision);
  } catch (err) {
    const e = toGrpcError(err, o.logger);
    callback(e);
    const code = GRPC_CODE_NAMES[e.code!] ?? "unknown";
    const seconds = (performance.now() - started) / 1000;
    observer?.failed(code, seconds);
    traced?.failed(code, seconds, req);
    return;
  }
  callback(null, response);
  if (observer || traced) {
    const seconds = (performance.now() - started) / 1000;
    observer?.decided(req, decision, seconds);
    traced?.decided(req, decision, seconds);
  }
}

/** Apart from answer(): a closure there would cost a context per call also with tracing off. */
function decideTraced(traced: TracedCall, limiter: Limiter, req: RateLimitRequest): Promise<Decision> {
  return traced.run(() => limiter.shouldRateLimit(req));
}

/** grpc-js metadata as the trace propagators read it (values of a repeated key as a list). */
const METADATA_GETTER: HeaderGetter<grpc.Metadata> = {
  get(metadata, name) {
    const values = metadata.get(name);
    if (values.length === 0) return undefined;
    return values.length === 1 ? String(values[0]) : values.map(String);
  },
  keys: (metadata) => Object.keys(metadata.getMap()),
};

/**
 * Bad bytes become INVALID_ARGUMENT with a message instead of grpc-js's bare INTERNAL: the wire is
 * checked first (wire-guard.ts), and a decoder error is returned as a RejectedRequest, not thrown.
 * Messages over the size cap never get here: grpc-js refuses them from the length prefix, before
 * buffering, with RESOURCE_EXHAUSTED (README "Security").
 */
function guardDecoding(service: grpc.ServiceDefinition, bounds: RequestBounds): grpc.ServiceDefinition {
  const method = service.ShouldRateLimit;
  const decode = method.requestDeserialize;
  return {
    ...service,
    ShouldRateLimit: {
      ...method,
      requestDeserialize(buf: Buffer) {
        const refused = checkRequestWire(buf, bounds);
        if (refused) return new RejectedRequest(refused);
        try {
          return decode(buf);
        } catch (err) {
          return new RejectedRequest(`malformed request: ${(err as Error).message}`);
        }
      },
    },
  };
}

const GRPC_CODE_NAMES: Record<number, string> = {
  [grpc.status.INVALID_ARGUMENT]: "invalid_argument",
  [grpc.status.UNAVAILABLE]: "unavailable",
  [grpc.status.INTERNAL]: "internal",
};

function toGrpcError(err: unknown, logger: Logger): Partial<grpc.StatusObject> {
  if (err instanceof InvalidRequestError) return { code: grpc.status.INVALID_ARGUMENT, details: err.message };
  if (err instanceof StoreUnavailableError) {
    return { code: grpc.status.UNAVAILABLE, details: `rate-limit store unavailable: ${err.message}` };
  }
  logger.error({ err }, "ShouldRateLimit failed");
  return { code: grpc.status.INTERNAL, details: "internal error" };
}
