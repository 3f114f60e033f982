// A minimal HTTP/2 client on a raw TCP socket, for what node:http2's client will not do: leave the
// server's PINGs unanswered, open a stream after GOAWAY, open more streams than the server allows.
// It writes frames and records every frame it receives; headers are sent as HPACK literals (no
// table, no Huffman) and received header blocks are kept undecoded. The frame codec is the load
// generator's (bench/lib/h2-connection.mjs).
import net from "node:net";
import { clientPreface, FLAG, FRAME, FrameReader, frameHeader, hpackLiterals } from "../../bench/lib/h2-connection.mjs";

export { FLAG, FRAME, H2_ERROR, SETTING } from "../../bench/lib/h2-connection.mjs";

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
  let isClosed = false;

  const send = (type: number, flags: number, streamId: number, payload: Buffer) => {
    if (!socket.destroyed) socket.write(Buffer.concat([frameHeader(payload.length, type, flags, streamId), payload]));
  };

  const reader = new FrameReader((type, flags, streamId, buf, start, length) => {
    const f: Frame = { type, flags, streamId, payload: Buffer.from(buf.subarray(start, start + length)), at: Date.now() - started };
    frames.push(f);
    if (f.type === FRAME.SETTINGS && !(f.flags & FLAG.ACK)) send(FRAME.SETTINGS, FLAG.ACK, 0, Buffer.alloc(0));
    if (f.type === FRAME.PING && !(f.flags & FLAG.ACK) && answerPings) send(FRAME.PING, FLAG.ACK, 0, f.payload);
  });
  socket.on("data", (chunk: Buffer) => {
    reader.push(chunk);
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
      socket.write(clientPreface(opts.settings ?? []));
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
