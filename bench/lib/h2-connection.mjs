// @ts-check
// HTTP/2 on a raw TCP socket, without node:http2: the frame codec, and H2Connection, the load generator's
// gRPC caller. test/helpers/h2-peer.ts builds its misbehaving client on the same codec (this file imports
// nothing of test/ or dist/).
//
// H2Connection sends pre-encoded gRPC requests (one HEADERS + one DATA frame each) and reads back only what a
// load generator needs: the first DATA bytes of each answer and the end of the stream. node:http2 costs a core
// at 13k calls/s, which on a 2-core machine would take that core from the server under test; this costs a
// fraction of it. It never decodes response headers (HPACK), so a gRPC error is "no message before the
// trailers".
import net from "node:net";

export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
/** Frame types (RFC 9113 6). */
export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8 };
/** SETTINGS identifiers (RFC 9113 6.5.2). */
export const SETTING = { ENABLE_PUSH: 0x2, INITIAL_WINDOW_SIZE: 0x4 };
/** Frame flags; ACK and END_STREAM share a bit (on different frame types). */
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8 };
/** Error codes of RST_STREAM and GOAWAY (RFC 9113 7). */
export const H2_ERROR = { NO_ERROR: 0, PROTOCOL_ERROR: 1, INTERNAL_ERROR: 2, REFUSED_STREAM: 7, CANCEL: 8 };
export const MAX_WINDOW = 2 ** 31 - 1;
export const DEFAULT_WINDOW = 65535;

/** @param {number} length @param {number} type @param {number} flags @param {number} streamId */
export function frameHeader(length, type, flags, streamId) {
  const h = Buffer.allocUnsafe(9);
  h.writeUIntBE(length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(streamId & 0x7fffffff, 5);
  return h;
}

/** A SETTINGS payload. @param {[number, number][]} pairs [identifier, value] */
export function settingsPayload(pairs) {
  const b = Buffer.alloc(6 * pairs.length);
  pairs.forEach(([id, value], i) => {
    b.writeUInt16BE(id, 6 * i);
    b.writeUInt32BE(value, 6 * i + 2);
  });
  return b;
}

/**
 * What a client sends first: the preface, its SETTINGS, and a connection WINDOW_UPDATE when `windowIncrement` > 0.
 * @param {[number, number][]} settings
 * @param {number} [windowIncrement]
 */
export function clientPreface(settings, windowIncrement = 0) {
  const s = settingsPayload(settings);
  const parts = [PREFACE, frameHeader(s.length, FRAME.SETTINGS, 0, 0), s];
  if (windowIncrement > 0) {
    const inc = Buffer.alloc(4);
    inc.writeUInt32BE(windowIncrement, 0);
    parts.push(frameHeader(4, FRAME.WINDOW_UPDATE, 0, 0), inc);
  }
  return Buffer.concat(parts);
}

/** HPACK integer with an n-bit prefix (RFC 7541 5.1). @param {number} n @param {number} prefixBits */
function hpackInt(n, prefixBits) {
  const max = (1 << prefixBits) - 1;
  if (n < max) return Buffer.from([n]);
  const out = [max];
  n -= max;
  while (n >= 128) {
    out.push((n % 128) + 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

/** HPACK string literal, no Huffman (RFC 7541 5.2). @param {string} s */
export function hpackString(s) {
  const bytes = Buffer.from(s, "utf8");
  return Buffer.concat([hpackInt(bytes.length, 7), bytes]);
}

/** A header block of "literal header field without indexing, new name" (RFC 7541 6.2.2): no table state. @param {[string, string][]} list */
export function hpackLiterals(list) {
  const parts = [];
  for (const [name, value] of list) parts.push(Buffer.from([0x00]), hpackString(name), hpackString(value));
  return Buffer.concat(parts);
}

/**
 * @callback OnFrame
 * @param {number} type
 * @param {number} flags
 * @param {number} streamId
 * @param {Buffer} buf the frame's payload is buf[start, start + length), valid only during the call
 * @param {number} start
 * @param {number} length
 * @returns {void}
 */

/** Splits received bytes into frames, across chunk boundaries, without copying payloads. */
export class FrameReader {
  /** @param {OnFrame} onFrame */
  constructor(onFrame) {
    this.onFrame = onFrame;
    /** @type {Buffer} bytes of a frame not yet whole */
    this.pending = Buffer.alloc(0);
  }

  /** @param {Buffer} chunk */
  push(chunk) {
    const buf = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    let at = 0;
    while (buf.length - at >= 9) {
      const length = buf.readUIntBE(at, 3);
      if (buf.length - at < 9 + length) break;
      this.onFrame(buf[at + 3], buf[at + 4], buf.readUInt32BE(at + 5) & 0x7fffffff, buf, at + 9, length);
      at += 9 + length;
    }
    this.pending = at === buf.length ? Buffer.alloc(0) : buf.subarray(at);
  }
}

/**
 * Request headers, HPACK-encoded once: static-table indexes and literals never indexed, so no table state.
 * @param {string} authority @param {string} path
 */
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
 * A gRPC caller for load. onDone(code, startedAt): code 1 OK, 2 OVER_LIMIT (RateLimitResponse.overall_code),
 * 0 no message (a gRPC error or a reset stream).
 */
export class H2Connection {
  /** @param {number} port @param {string} path @param {(code: number, started: number) => void} onDone */
  constructor(port, path, onDone) {
    this.onDone = onDone;
    this.headerBlock = requestHeaderBlock(`127.0.0.1:${port}`, path);
    this.nextStreamId = 1;
    /** @type {Map<number, { started: number, code: number }>} */
    this.streams = new Map();
    this.sendWindow = DEFAULT_WINDOW; // connection-level flow control for our DATA
    /** @type {[number, Buffer][]} [streamId, body] waiting for window */
    this.queued = [];
    this.received = 0;
    /** @type {Buffer[]} */
    this.out = [];
    this.flushScheduled = false;
    this.reader = new FrameReader((type, flags, id, buf, start, length) => this.onFrame(type, flags, id, buf, start, length));
    this.closed = false;
    this.socket = net.connect(port, "127.0.0.1");
    this.socket.setNoDelay(true);
    this.ready = new Promise((resolve, reject) => {
      this.socket.once("connect", resolve);
      this.socket.once("error", reject);
    });
    this.socket.on("data", (chunk) => {
      this.reader.push(chunk);
      this.flush();
    });
    this.socket.on("close", () => {
      this.closed = true;
    });
    this.socket.write(
      clientPreface(
        [
          [SETTING.ENABLE_PUSH, 0],
          [SETTING.INITIAL_WINDOW_SIZE, MAX_WINDOW],
        ],
        MAX_WINDOW - DEFAULT_WINDOW,
      ),
    );
  }

  get inFlight() {
    return this.streams.size;
  }

  /** Queue one request; written at the end of the current tick (or when the server grants window). @param {Buffer} body @param {number} started */
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

  /** @param {number} id @param {Buffer} body */
  emit(id, body) {
    this.sendWindow -= body.length;
    this.out.push(frameHeader(this.headerBlock.length, FRAME.HEADERS, FLAG.END_HEADERS, id), this.headerBlock);
    this.out.push(frameHeader(body.length, FRAME.DATA, FLAG.END_STREAM, id), body);
  }

  flush() {
    this.flushScheduled = false;
    if (this.out.length === 0 || this.closed) return;
    this.socket.write(this.out.length === 1 ? this.out[0] : Buffer.concat(this.out));
    this.out = [];
  }

  /** @type {OnFrame} */
  onFrame(type, flags, id, buf, start, length) {
    switch (type) {
      case FRAME.DATA: {
        this.received += length;
        const s = this.streams.get(id);
        let p = start;
        if (flags & FLAG.PADDED) p += 1;
        // gRPC frame header (5 bytes), then RateLimitResponse: overall_code is field 1 (tag 0x08).
        if (s && s.code === -1 && length >= 7 && buf[p + 5] === 0x08) s.code = buf[p + 6];
        if (this.received > MAX_WINDOW / 2) this.grantWindow();
        if (flags & FLAG.END_STREAM) this.finish(id);
        break;
      }
      case FRAME.HEADERS:
        if (flags & FLAG.END_STREAM) this.finish(id); // trailers
        break;
      case FRAME.RST_STREAM:
        this.finish(id);
        break;
      case FRAME.SETTINGS:
        if (!(flags & FLAG.ACK)) this.out.push(frameHeader(0, FRAME.SETTINGS, FLAG.ACK, 0));
        break;
      case FRAME.PING:
        if (!(flags & FLAG.ACK)) this.out.push(frameHeader(8, FRAME.PING, FLAG.ACK, 0), Buffer.from(buf.subarray(start, start + 8)));
        break;
      case FRAME.GOAWAY:
        this.closed = true;
        for (const id of [...this.streams.keys()]) this.finish(id);
        break;
      case FRAME.WINDOW_UPDATE:
        if (id === 0) {
          this.sendWindow += buf.readUInt32BE(start) & 0x7fffffff;
          while (this.queued.length > 0 && this.sendWindow >= this.queued[0][1].length) {
            const [queuedId, body] = /** @type {[number, Buffer]} */ (this.queued.shift());
            this.emit(queuedId, body);
          }
        }
        break;
      default:
        break; // PRIORITY, PUSH_PROMISE (disabled), CONTINUATION: nothing to do
    }
  }

  grantWindow() {
    const inc = Buffer.allocUnsafe(4);
    inc.writeUInt32BE(this.received, 0);
    this.out.push(frameHeader(4, FRAME.WINDOW_UPDATE, 0, 0), inc);
    this.received = 0;
  }

  /** @param {number} id */
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
