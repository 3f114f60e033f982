// What grpc-js does not check on a stream, checked before grpc-js sees it: unknown methods (grpc-js
// answers them with an unencoded grpc-message), grpc-encoding other than identity and the compressed
// flag (grpc-js decompresses gzip/deflate and reads a flagged message under identity as plain), and
// request bodies that never end (grpc-js waits for them for ever).
//
// grpc-js has no public hook before its stream handler, so this reaches into one private field: the
// node:http2 server grpc-js made for a connection injector (Server.http2Servers). If a grpc-js
// upgrade moves it, startGrpcServer fails at start with a message saying so, never silently.
import http2 from "node:http2";
import net from "node:net";
import type * as grpc from "@grpc/grpc-js";
import { ACCEPT_ENCODING, encodeGrpcMessage, GRPC_STATUS, refusal } from "./grpc-refusals.js";

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = http2.constants;
const END_STREAM = http2.constants.NGHTTP2_FLAG_END_STREAM;

type AnyHttp2Server = http2.Http2Server | http2.Http2SecureServer;
type StreamListener = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, raw: string[]) => void;

export interface GateOptions {
  /** Every method path the server registered. */
  paths: ReadonlySet<string>;
  /** A request body not ended this long after the headers: RST_STREAM CANCEL. */
  bodyTimeoutMs: number;
}

/** The node:http2 server behind a grpc-js connection injector, made by `inject()`. */
export function injectedHttp2Server(server: grpc.Server, inject: () => void): AnyHttp2Server {
  const servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  const before = servers instanceof Map ? new Set(servers.keys()) : undefined;
  inject();
  const made = servers instanceof Map ? [...servers.keys()].filter((s) => !before!.has(s)) : [];
  if (made.length !== 1 || !(made[0] instanceof net.Server)) {
    throw new Error("this @grpc/grpc-js version keeps its HTTP/2 servers elsewhere (Server.http2Servers); server/grpc-js-gate.ts needs an update");
  }
  return made[0] as AnyHttp2Server;
}

/** Puts the checks in front of grpc-js's 'stream' listener on `h2`. */
export function gateStreams(h2: AnyHttp2Server, o: GateOptions): void {
  const listeners = h2.listeners("stream") as StreamListener[];
  if (listeners.length !== 1) {
    throw new Error(`expected grpc-js's one 'stream' listener on its HTTP/2 server, found ${listeners.length}; server/grpc-js-gate.ts needs an update`);
  }
  const grpcJs = listeners[0];
  h2.removeAllListeners("stream");
  const gate: StreamListener = (stream, headers, flags, raw) => {
    if (refusedAtHeaders(stream, headers, o.paths)) return;
    grpcJs.call(h2, stream, headers, flags, raw);
    if (flags & END_STREAM || stream.closed) return;
    // After grpc-js added its own 'data' listener (and paused the stream): this one runs first.
    stream.prependOnceListener("data", (chunk: Buffer) => checkFlag(stream, chunk));
    cutIfBodyStalls(stream, o.bodyTimeoutMs);
  };
  (h2 as http2.Http2Server).on("stream", gate);
}

/** Refuses (and answers) a gRPC call at its headers; false = grpc-js takes it (it answers 415 itself). */
function refusedAtHeaders(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, paths: ReadonlySet<string>): boolean {
  const contentType = headers["content-type"];
  if (typeof contentType !== "string" || !contentType.startsWith("application/grpc")) return false;
  const path = headers[":path"] ?? "";
  if (!paths.has(path)) {
    refuse(stream, GRPC_STATUS.UNIMPLEMENTED, refusal.unknownMethod(path));
    return true;
  }
  const encoding = headers["grpc-encoding"];
  if (encoding !== undefined && encoding !== "identity") {
    refuse(stream, GRPC_STATUS.UNIMPLEMENTED, refusal.unsupportedEncoding(String(encoding)));
    return true;
  }
  return false;
}

/** The first byte of the body is the first message's compressed flag; grpc-encoding is identity here. */
function checkFlag(stream: http2.ServerHttp2Stream, chunk: Buffer): void {
  const flag = chunk[0];
  if (flag === 0 || stream.headersSent) return;
  // Closing now (synchronously) makes grpc-js drop this chunk: it checks stream.closed first.
  refuse(stream, GRPC_STATUS.INTERNAL, refusal.compressedWithoutEncoding);
}

/** A trailers-only answer, then RST_STREAM NO_ERROR: the rest of the request is not wanted (RFC 9113 8.1). */
function refuse(stream: http2.ServerHttp2Stream, code: number, message: string): void {
  stream.on("error", () => {}); // a client that is gone already: nothing to answer
  if (stream.destroyed || stream.closed) return;
  stream.respond(
    {
      ":status": 200,
      "content-type": "application/grpc",
      "grpc-accept-encoding": ACCEPT_ENCODING,
      "grpc-status": String(code),
      "grpc-message": encodeGrpcMessage(message),
    },
    { endStream: true },
  );
  stream.close(NGHTTP2_NO_ERROR);
}

function cutIfBodyStalls(stream: http2.ServerHttp2Stream, ms: number): void {
  const timer = setTimeout(() => {
    if (!stream.closed && !stream.destroyed) stream.close(NGHTTP2_CANCEL);
  }, ms);
  const done = () => clearTimeout(timer);
  stream.once("end", done);
  stream.once("close", done);
}
