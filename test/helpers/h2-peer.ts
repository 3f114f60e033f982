// A minimal HTTP/2 client on a raw TCP socket, for what node:http2's client will not do: leave the
// server's PINGs unanswered, open a stream after GOAWAY, open more streams than the server allows.
// It writes frames and records every frame it receives; headers are sent as HPACK literals (no
// table, no Huffman) and received header blocks are kept undecoded.
import net from "node:net";

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8 } as const;
/** SETTINGS identifiers (RFC 9113 6.5.2). */
export const SETTING = { INITIAL_WINDOW_SIZE: 0x4 } as const;
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;
export const H2_ERROR = { NO_ERROR: 0, PROTOCOL_ERROR: 1, INTERNAL_ERROR: 2, REFUSED_STREAM: 7, CANCEL: 8 } as const;

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
  /** ms since the peer connected. */
  at: number;
}

export interface H2Peer {
  /** Every frame received so far, in order. */
  frames: Frame[];
  /** Resolves when the TCP connection is closed (by either side), with ms since the peer connected. */
  closed: Promise<number>;
  /** The first frame received (so far or later) that matches; rejects after timeoutMs or when the connection closes first. */
  waitFor(what: string, match: (f: Frame) => boolean, timeoutMs?: number): Promise<Frame>;
  /** HEADERS (END_HEADERS, and END_STREAM when endStream) with the given header list. */
  headers(streamId: number, list: [string, string][], endStream?: boolean): void;
  data(streamId: number, body: Buffer, endStream?: boolean): void;
  ping(payload: Buffer): void;
  /** WINDOW_UPDATE: `increment` more bytes the server may send on the stream (0 = the connection). */
  windowUpdate(streamId: number, increment: number): void;
  /** Frames written meanwhile go out in one socket write (many streams opened at once). */
  batch(write: () => void): void;
  destroy(): void;
}

export interface H2PeerOptions {
  /** Acknowledge the server's PINGs (default true). */
  answerPings?: boolean;
  /** The client's first SETTINGS frame: [identifier, value] pairs (default none). */
  settings?: [number, number][];
}

export function h2Peer(port: number, opts: H2PeerOptions = {}): Promise<H2Peer> {
  const answerPings = opts.answerPings ?? true;
  const socket = net.connect(port, "127.0.0.1");
  const started = Date.now();
  const frames: Frame[] = [];
  const waiters = new Set<() => void>();
  let buf = Buffer.alloc(0);
  let isClosed = false;

  const send = (type: number, flags: number, streamId: number, payload: Buffer) => {
    const head = Buffer.alloc(9);
    head.writeUIntBE(payload.length, 0, 3);
    head.writeUInt8(type, 3);
    head.writeUInt8(flags, 4);
    head.writeUInt32BE(streamId & 0x7fffffff, 5);
    if (!socket.destroyed) socket.write(Buffer.concat([head, payload]));
  };

  socket.on("data", (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 9) {
      const len = buf.readUIntBE(0, 3);
      if (buf.length < 9 + len) break;
      const f: Frame = {
        type: buf.readUInt8(3),
        flags: buf.readUInt8(4),
        streamId: buf.readUInt32BE(5) & 0x7fffffff,
        payload: Buffer.from(buf.subarray(9, 9 + len)),
        at: Date.now() - started,
      };
      buf = buf.subarray(9 + len);
      frames.push(f);
      if (f.type === FRAME.SETTINGS && !(f.flags & FLAG.ACK)) send(FRAME.SETTINGS, FLAG.ACK, 0, Buffer.alloc(0));
      if (f.type === FRAME.PING && !(f.flags & FLAG.ACK) && answerPings) send(FRAME.PING, FLAG.ACK, 0, f.payload);
    }
    for (const w of waiters) w();
  });
  socket.on("error", () => {}); // the close that follows is what tests wait on
  const closed = new Promise<number>((resolve) =>
    socket.on("close", () => {
      isClosed = true;
      for (const w of waiters) w();
      resolve(Date.now() - started);
    }),
  );

  const peer: H2Peer = {
    frames,
    closed,
    waitFor(what, match, timeoutMs = 10_000) {
      return new Promise<Frame>((resolve, reject) => {
        const check = () => {
          const f = frames.find(match);
          if (f) finish(() => resolve(f));
          else if (isClosed) finish(() => reject(new Error(`connection closed before ${what}; frames: ${describeFrames(frames)}`)));
        };
        const timer = setTimeout(() => finish(() => reject(new Error(`no ${what} within ${timeoutMs} ms; frames: ${describeFrames(frames)}`))), timeoutMs);
        const finish = (then: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          then();
        };
        waiters.add(check);
        check();
      });
    },
    headers(streamId, list, endStream = false) {
      send(FRAME.HEADERS, FLAG.END_HEADERS | (endStream ? FLAG.END_STREAM : 0), streamId, hpackLiterals(list));
    },
    data(streamId, body, endStream = false) {
      send(FRAME.DATA, endStream ? FLAG.END_STREAM : 0, streamId, body);
    },
    ping(payload) {
      send(FRAME.PING, 0, 0, payload);
    },
    windowUpdate(streamId, increment) {
      const payload = Buffer.alloc(4);
      payload.writeUInt32BE(increment);
      send(FRAME.WINDOW_UPDATE, 0, streamId, payload);
    },
    batch(write) {
      socket.cork();
      try {
        write();
      } finally {
        socket.uncork();
      }
    },
    destroy() {
      socket.destroy();
    },
  };

  return new Promise((resolve, reject) => {
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.removeListener("error", reject);
      socket.write(PREFACE);
      const settings = Buffer.alloc(6 * (opts.settings?.length ?? 0));
      opts.settings?.forEach(([id, value], i) => {
        settings.writeUInt16BE(id, 6 * i);
        settings.writeUInt32BE(value, 6 * i + 2);
      });
      send(FRAME.SETTINGS, 0, 0, settings);
      resolve(peer);
    });
  });
}

/** The request headers of a gRPC call on `path`. */
export function grpcRequestHeaders(port: number, path: string): [string, string][] {
  return [
    [":method", "POST"],
    [":scheme", "http"],
    [":path", path],
    [":authority", `127.0.0.1:${port}`],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
  ];
}

/** RST_STREAM / GOAWAY error code; GOAWAY's last stream id. */
export const rstCode = (f: Frame) => f.payload.readUInt32BE(0);
export const goawayLastStream = (f: Frame) => f.payload.readUInt32BE(0) & 0x7fffffff;
export const goawayCode = (f: Frame) => f.payload.readUInt32BE(4);

function describeFrames(frames: Frame[]): string {
  const names = Object.fromEntries(Object.entries(FRAME).map(([k, v]) => [v, k]));
  return frames.map((f) => `${names[f.type] ?? f.type}(s${f.streamId},f${f.flags})`).join(" ") || "none";
}

/** HPACK "literal header field without indexing, new name", no Huffman (RFC 7541 6.2.2). */
function hpackLiterals(list: [string, string][]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of list) parts.push(Buffer.from([0x00]), hpackString(name), hpackString(value));
  return Buffer.concat(parts);
}

function hpackString(s: string): Buffer {
  const bytes = Buffer.from(s, "utf8");
  return Buffer.concat([hpackInt(bytes.length, 7), bytes]);
}

function hpackInt(n: number, prefixBits: number): Buffer {
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
