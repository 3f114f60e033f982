// A minimal HTTP/2 client connection for load generation only: it sends pre-encoded gRPC requests
// (one HEADERS + one DATA frame each) and reads back only what a load generator needs: the first
// DATA bytes of each answer and the end of the stream. node:http2 costs a core at 13k calls/s, which
// on a 2-core machine would take that core from the server under test; this costs a fraction of it.
// It never decodes response headers (HPACK), so a gRPC error is "no message before the trailers".
import net from "node:net";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const DATA = 0,
  HEADERS = 1,
  RST_STREAM = 3,
  SETTINGS = 4,
  PING = 6,
  GOAWAY = 7,
  WINDOW_UPDATE = 8;
const END_STREAM = 0x1,
  ACK = 0x1,
  END_HEADERS = 0x4,
  PADDED = 0x8;
const MAX_WINDOW = 2 ** 31 - 1;
const DEFAULT_WINDOW = 65535;

function frameHeader(length, type, flags, streamId) {
  const h = Buffer.allocUnsafe(9);
  h.writeUIntBE(length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(streamId, 5);
  return h;
}

function hpackString(s) {
  const b = Buffer.from(s);
  if (b.length > 126) throw new Error("header too long for this encoder");
  return Buffer.concat([Buffer.from([b.length]), b]); // no Huffman, 7-bit length
}

/** Request headers, HPACK-encoded once: static-table indexes and literals never indexed, so no table state. */
function requestHeaderBlock(authority, path) {
  return Buffer.concat([
    Buffer.from([0x83]), // :method POST
    Buffer.from([0x86]), // :scheme http
    Buffer.from([0x04]),
    hpackString(path), // :path, literal with static name 4
    Buffer.from([0x01]),
    hpackString(authority), // :authority, static name 1
    Buffer.from([0x0f, 0x10]),
    hpackString("application/grpc"), // content-type, static name 31
    Buffer.from([0x00]),
    hpackString("te"),
    hpackString("trailers"),
  ]);
}

/**
 * onDone(code, startedAt): code 1 OK, 2 OVER_LIMIT (RateLimitResponse.overall_code), 0 no message
 * (a gRPC error or a reset stream).
 */
export class H2Connection {
  constructor(port, path, onDone) {
    this.onDone = onDone;
    this.headerBlock = requestHeaderBlock(`127.0.0.1:${port}`, path);
    this.nextStreamId = 1;
    this.streams = new Map(); // id -> { started, code }
    this.sendWindow = DEFAULT_WINDOW; // connection-level flow control for our DATA
    this.queued = []; // [streamId, body] waiting for window
    this.received = 0;
    this.out = [];
    this.flushScheduled = false;
    this.inBuf = Buffer.alloc(0);
    this.closed = false;
    this.socket = net.connect(port, "127.0.0.1");
    this.socket.setNoDelay(true);
    this.ready = new Promise((resolve, reject) => {
      this.socket.once("connect", resolve);
      this.socket.once("error", reject);
    });
    this.socket.on("data", (chunk) => this.onData(chunk));
    this.socket.on("close", () => {
      this.closed = true;
    });
    const settings = Buffer.alloc(12);
    settings.writeUInt16BE(0x2, 0); // ENABLE_PUSH = 0
    settings.writeUInt32BE(0, 2);
    settings.writeUInt16BE(0x4, 6); // INITIAL_WINDOW_SIZE = max
    settings.writeUInt32BE(MAX_WINDOW, 8);
    const windowUpdate = Buffer.alloc(4);
    windowUpdate.writeUInt32BE(MAX_WINDOW - DEFAULT_WINDOW, 0);
    this.socket.write(Buffer.concat([PREFACE, frameHeader(12, SETTINGS, 0, 0), settings, frameHeader(4, WINDOW_UPDATE, 0, 0), windowUpdate]));
  }

  get inFlight() {
    return this.streams.size;
  }

  /** Queue one request; written at the end of the current tick (or when the server grants window). */
  send(body, started) {
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    this.streams.set(id, { started, code: -1 });
    if (this.queued.length > 0 || this.sendWindow < body.length) this.queued.push([id, body]);
    else this.emit(id, body);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      queueMicrotask(() => this.flush());
    }
  }

  emit(id, body) {
    this.sendWindow -= body.length;
    this.out.push(frameHeader(this.headerBlock.length, HEADERS, END_HEADERS, id), this.headerBlock);
    this.out.push(frameHeader(body.length, DATA, END_STREAM, id), body);
  }

  flush() {
    this.flushScheduled = false;
    if (this.out.length === 0 || this.closed) return;
    this.socket.write(this.out.length === 1 ? this.out[0] : Buffer.concat(this.out));
    this.out = [];
  }

  onData(chunk) {
    const buf = this.inBuf.length > 0 ? Buffer.concat([this.inBuf, chunk]) : chunk;
    let at = 0;
    while (buf.length - at >= 9) {
      const length = buf.readUIntBE(at, 3);
      if (buf.length - at < 9 + length) break;
      const type = buf[at + 3];
      const flags = buf[at + 4];
      const streamId = buf.readUInt32BE(at + 5) & 0x7fffffff;
      this.onFrame(type, flags, streamId, buf, at + 9, length);
      at += 9 + length;
    }
    this.inBuf = at === buf.length ? Buffer.alloc(0) : buf.subarray(at);
    this.flush();
  }

  onFrame(type, flags, id, buf, start, length) {
    switch (type) {
      case DATA: {
        this.received += length;
        const s = this.streams.get(id);
        let p = start;
        if (flags & PADDED) p += 1;
        // gRPC frame header (5 bytes), then RateLimitResponse: overall_code is field 1 (tag 0x08).
        if (s && s.code === -1 && length >= 7 && buf[p + 5] === 0x08) s.code = buf[p + 6];
        if (this.received > MAX_WINDOW / 2) this.grantWindow();
        if (flags & END_STREAM) this.finish(id);
        break;
      }
      case HEADERS:
        if (flags & END_STREAM) this.finish(id); // trailers
        break;
      case RST_STREAM:
        this.finish(id);
        break;
      case SETTINGS:
        if (!(flags & ACK)) this.out.push(frameHeader(0, SETTINGS, ACK, 0));
        break;
      case PING:
        if (!(flags & ACK)) this.out.push(frameHeader(8, PING, ACK, 0), Buffer.from(buf.subarray(start, start + 8)));
        break;
      case GOAWAY:
        this.closed = true;
        for (const id of [...this.streams.keys()]) this.finish(id);
        break;
      case WINDOW_UPDATE:
        if (id === 0) {
          this.sendWindow += buf.readUInt32BE(start) & 0x7fffffff;
          while (this.queued.length > 0 && this.sendWindow >= this.queued[0][1].length) this.emit(...this.queued.shift());
        }
        break;
      default:
        break; // PRIORITY, PUSH_PROMISE (disabled), CONTINUATION: nothing to do
    }
  }

  grantWindow() {
    const inc = Buffer.allocUnsafe(4);
    inc.writeUInt32BE(this.received, 0);
    this.out.push(frameHeader(4, WINDOW_UPDATE, 0, 0), inc);
    this.received = 0;
  }

  finish(id) {
    const s = this.streams.get(id);
    if (!s) return;
    this.streams.delete(id);
    this.onDone(s.code === -1 ? 0 : s.code, s.started);
  }

  close() {
    this.closed = true;
    this.socket.destroy();
  }
}
