// Streaming calls (client, server and bidirectional) on the h2 server, for the services of
// TransportOptions.streams (server/stream-contract.ts). Per call: the request's messages are read one at a
// time, each no larger than the message cap (checked from its prefix before it is held); while the service
// works on one the stream is paused, so node stops granting the client flow-control window (backpressure).
// Answers the client does not take are bounded: past MAX_UNSENT_BYTES the call is reset. A call lives
// until either side ends it; at shutdown every call ends with UNAVAILABLE, after the GOAWAY, so clients
// reconnect elsewhere.
import http2 from "node:http2";
import type { Logger } from "pino";
import type { StreamCall, StreamEnd, StreamHandler, StreamService } from "../stream-contract.js";
import { CONTENT_TYPE, trailersOnly } from "./status.js";
import { ACCEPT_ENCODING, encodeGrpcMessage, GRPC_STATUS, refusal } from "./refusals.js";

const RESPONSE_HEADERS = [":status", "200", "content-type", CONTENT_TYPE, "grpc-accept-encoding", ACCEPT_ENCODING];
const WITH_TRAILERS = { waitForTrailers: true, sendDate: false };
const END_STREAM = { endStream: true, sendDate: false };
/** Answer bytes queued for a client that does not read; past it the call is reset (CANCEL). */
const MAX_UNSENT_BYTES = 1 << 20;
const { NGHTTP2_CANCEL } = http2.constants;

/** The streaming services of one server, by path, and their open calls. */
export class StreamCalls {
  private readonly byPath = new Map<string, StreamService>();
  private readonly open = new Map<StreamService, Set<OpenCall>>();
  private stopping = false;

  constructor(
    services: readonly StreamService[],
    private readonly maxMessageBytes: number,
    private readonly logger: Logger,
  ) {
    for (const s of services) {
      this.byPath.set(s.path, s);
      this.open.set(s, new Set());
    }
  }

  handles(path: string | undefined): boolean {
    return path !== undefined && this.byPath.has(path);
  }

  /** Calls open now (metrics, tests). */
  get size(): number {
    let n = 0;
    for (const set of this.open.values()) n += set.size;
    return n;
  }

  /** A new stream on a streaming path: checked as a unary call is, then handed to its service. */
  start(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    const service = this.byPath.get(headers[":path"] as string)!;
    const refuse = (code: number, message: string) => {
      if (!stream.destroyed && !stream.closed) stream.respond(trailersOnly(code, message), END_STREAM);
      stream.resume(); // whatever the client still sends is read and dropped
    };
    if (headers[":method"] !== "POST") {
      stream.respond([":status", "405", "allow", "POST"], END_STREAM);
      return void stream.resume();
    }
    const contentType = headers["content-type"];
    if (typeof contentType !== "string" || !/^application\/grpc(\+proto)?(;|$)/i.test(contentType.trim())) {
      stream.respond([":status", "415"], END_STREAM);
      return void stream.resume();
    }
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return refuse(GRPC_STATUS.UNIMPLEMENTED, refusal.unsupportedEncoding(String(encoding)));
    if (this.stopping) return refuse(GRPC_STATUS.UNAVAILABLE, "the server is shutting down");
    const calls = this.open.get(service)!;
    if (calls.size >= service.maxCalls) {
      return refuse(GRPC_STATUS.RESOURCE_EXHAUSTED, `too many open ${service.path} calls on this server (at most ${service.maxCalls})`);
    }
    const call = new OpenCall(stream, this.maxMessageBytes, this.logger, () => calls.delete(call));
    const handler = service.open(call);
    if (!("closed" in handler)) return refuse(handler.code, handler.message);
    calls.add(call);
    call.begin(handler);
  }

  /** Shutdown: every call ends with UNAVAILABLE (the GOAWAY went first), new ones are refused. */
  shutdown(): void {
    this.stopping = true;
    for (const set of this.open.values()) for (const c of [...set]) c.finish(GRPC_STATUS.UNAVAILABLE, "the server is shutting down", "shutdown");
  }
}

class OpenCall implements StreamCall {
  readonly peer: string;
  private handler: StreamHandler | undefined;
  private over = false;
  private trailers: Record<string, string> = { "grpc-status": "0" };
  /** Parsing the prefix and body of the message being received. */
  private head = Buffer.alloc(5);
  private headLen = 0;
  private body: Buffer | undefined;
  private bodyLen = 0;
  /** Messages received and not yet handed to the service (at most one while it works: the stream pauses). */
  private readonly queue: Buffer[] = [];
  private busy = false;
  private clientEnded = false;

  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    private readonly maxMessageBytes: number,
    private readonly logger: Logger,
    private readonly onGone: () => void,
  ) {
    const s = stream.session?.socket;
    this.peer = s ? `${s.remoteAddress}:${s.remotePort}` : "unknown";
  }

  begin(handler: StreamHandler): void {
    this.handler = handler;
    const s = this.stream;
    s.respond(RESPONSE_HEADERS, WITH_TRAILERS);
    s.on("wantTrailers", () => {
      if (!s.destroyed && !s.closed) s.sendTrailers(this.trailers);
    });
    s.on("data", (chunk: Buffer) => this.take(chunk));
    s.on("end", () => {
      this.clientEnded = true;
      this.pump();
    });
    s.once("close", () => this.gone("reset"));
  }

  send(message: Buffer): boolean {
    const s = this.stream;
    if (this.over || s.destroyed || s.closed || !s.writable) return false;
    if (s.writableLength > MAX_UNSENT_BYTES) {
      // The client takes no answers: the call goes rather than the memory.
      this.logger.debug({ peer: this.peer, unsent: s.writableLength }, "streaming call reset: the client does not read its answers");
      this.over = true;
      s.close(NGHTTP2_CANCEL);
      this.gone("reset");
      return false;
    }
    const prefix = Buffer.allocUnsafe(5);
    prefix[0] = 0;
    prefix.writeUInt32BE(message.length, 1);
    s.write(Buffer.concat([prefix, message], 5 + message.length));
    return true;
  }

  end(code: number, message?: string): void {
    this.finish(code, message, "ended");
  }

  finish(code: number, message: string | undefined, why: StreamEnd): void {
    if (this.over) return;
    this.over = true;
    this.trailers = message ? { "grpc-status": String(code), "grpc-message": encodeGrpcMessage(message.slice(0, 1024)) } : { "grpc-status": String(code) };
    const s = this.stream;
    if (!s.destroyed && !s.closed) {
      s.resume(); // drain what the client still sends; its end closes the stream
      s.end();
    }
    this.gone(why);
  }

  private gone(why: StreamEnd): void {
    const h = this.handler;
    this.handler = undefined;
    this.over = true;
    this.queue.length = 0;
    this.body = undefined;
    this.onGone();
    if (h) {
      try {
        h.closed(why);
      } catch (err) {
        this.logger.error({ err }, "streaming call: closing its handler failed");
      }
    }
  }

  /** Splits DATA into messages; a message over the cap or compressed ends the call before it is held. */
  private take(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length && !this.over) {
      if (this.body === undefined) {
        const n = Math.min(5 - this.headLen, chunk.length - off);
        chunk.copy(this.head, this.headLen, off, off + n);
        this.headLen += n;
        off += n;
        if (this.headLen < 5) return;
        const flags = this.head[0];
        const length = this.head.readUInt32BE(1);
        if (flags !== 0) {
          return this.finish(
            flags === 1 ? GRPC_STATUS.INTERNAL : GRPC_STATUS.INTERNAL,
            flags === 1 ? refusal.compressedWithoutEncoding : `malformed message prefix: flags byte ${flags}, expected 0`,
            "ended",
          );
        }
        if (length > this.maxMessageBytes) return this.finish(GRPC_STATUS.RESOURCE_EXHAUSTED, refusal.tooLarge(length, this.maxMessageBytes), "ended");
        this.body = Buffer.allocUnsafe(length);
        this.bodyLen = 0;
      }
      const n = Math.min(this.body.length - this.bodyLen, chunk.length - off);
      chunk.copy(this.body, this.bodyLen, off, off + n);
      this.bodyLen += n;
      off += n;
      if (this.bodyLen === this.body.length) {
        this.queue.push(this.body);
        this.body = undefined;
        this.headLen = 0;
      }
    }
    this.pump();
  }

  /** Hands queued messages to the service one at a time; the stream reads no more while one is pending. */
  private pump(): void {
    while (!this.busy && !this.over) {
      const msg = this.queue.shift();
      if (msg === undefined) break;
      let r: void | Promise<void>;
      try {
        r = this.handler!.message(msg);
      } catch (err) {
        this.logger.error({ err }, "streaming call: the service failed on a message");
        return this.finish(GRPC_STATUS.INTERNAL, "internal error", "ended");
      }
      if (r instanceof Promise) {
        this.busy = true;
        this.stream.pause();
        r.then(
          () => this.resumeAfter(),
          (err) => {
            this.logger.error({ err }, "streaming call: the service failed on a message");
            this.finish(GRPC_STATUS.INTERNAL, "internal error", "ended");
          },
        );
        return;
      }
    }
    if (!this.busy && this.queue.length === 0 && this.clientEnded && !this.over) {
      // Half-closed by the client and every message answered: the call is complete.
      if (this.body !== undefined || this.headLen > 0) return this.finish(GRPC_STATUS.INTERNAL, "the request ended inside a message", "client_end");
      this.finish(GRPC_STATUS.OK, undefined, "client_end");
    }
  }

  private resumeAfter(): void {
    this.busy = false;
    if (this.over) return;
    if (!this.stream.destroyed) this.stream.resume();
    this.pump();
  }
}
