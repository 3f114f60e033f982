// gRPC calls on node:http2 client sessions, recorded frame by frame as far as node shows it: whether the
// answer was trailers-only (response HEADERS with END_STREAM), headers as sent, grpc-message as sent and
// decoded, the RST_STREAM code. For protocol details the grpc-js client hides, and for bytes no
// well-behaved client sends (request bodies from bench/lib/frame.mjs). The one node:http2 caller of the
// tests; bench/lib/h2-connection.mjs is the raw-socket one.
import http2 from "node:http2";
import { RLS_PATH } from "../../bench/lib/frame.mjs";

export { RLS_PATH };
export const HEALTH_CHECK_PATH = "/grpc.health.v1.Health/Check";

export interface H2Answer {
  httpStatus?: number;
  headers?: http2.IncomingHttpHeaders;
  /** The response HEADERS as name, value pairs in the order sent, values as sent. */
  rawHeaders?: string[];
  /** The response HEADERS frame ended the stream: a trailers-only answer when it carries grpc-status. */
  headersEndStream: boolean;
  trailers?: http2.IncomingHttpHeaders;
  grpcStatus?: number;
  /** grpc-message exactly as it came on the wire, and percent-decoded (PROTOCOL-HTTP2.md). */
  rawMessage?: string;
  message?: string;
  data: Buffer;
  /** The stream's RST_STREAM code as node reports it at close (NO_ERROR, 0, after a clean end); unset when the client cancelled on timeout. */
  rstCode?: number;
  error?: string;
  /** From sending the headers to the answer (or the close). */
  ms: number;
  /** No close within timeoutMs: the client cancelled the stream. */
  timedOut: boolean;
}

export interface H2CallOptions {
  path?: string;
  /** Replace or add request headers; a header set to undefined is left out. */
  headers?: Record<string, string | undefined>;
  body?: Buffer | Buffer[];
  /** End the request body (default true); false leaves the stream open for the test. */
  end?: boolean;
  /** The client cancels a stream still open this long after it began (default 10 s): every call ends. */
  timeoutMs?: number;
}

export interface H2Call {
  stream: http2.ClientHttp2Stream;
  /** Resolves when the server has answered (trailers, a trailers-only HEADERS, or no answer and the stream closed). */
  answered: Promise<H2Answer>;
  /** Resolves when the stream is closed. */
  closed: Promise<H2Answer>;
}

export function h2Call(session: http2.ClientHttp2Session, o: H2CallOptions = {}): H2Call {
  const headers: http2.OutgoingHttpHeaders = {
    ":method": "POST",
    ":path": o.path ?? RLS_PATH,
    "content-type": "application/grpc",
    te: "trailers",
  };
  for (const [k, v] of Object.entries(o.headers ?? {})) {
    if (v === undefined) delete headers[k];
    else headers[k] = v;
  }
  const started = performance.now();
  const stream = session.request(headers);
  const a: H2Answer = { headersEndStream: false, data: Buffer.alloc(0), ms: 0, timedOut: false };
  const timer = setTimeout(() => {
    a.timedOut = true;
    stream.close(http2.constants.NGHTTP2_CANCEL);
  }, o.timeoutMs ?? 10_000);
  const chunks: Buffer[] = [];
  let markAnswered!: () => void;
  const answered = new Promise<H2Answer>((resolve) => {
    markAnswered = () => {
      a.ms = performance.now() - started;
      resolve(a);
    };
  });
  const take = (h: http2.IncomingHttpHeaders) => {
    if (h["grpc-status"] === undefined) return false;
    a.grpcStatus = Number(h["grpc-status"]);
    a.rawMessage = String(h["grpc-message"] ?? "");
    a.message = decodeGrpcMessage(a.rawMessage);
    return true;
  };
  stream.on("response", (h, flags, rawHeaders) => {
    a.httpStatus = Number(h[":status"]);
    a.headers = h;
    a.rawHeaders = rawHeaders as unknown as string[];
    a.headersEndStream = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
    if (take(h) || a.headersEndStream) markAnswered();
  });
  stream.on("trailers", (h) => {
    a.trailers = h;
    take(h);
    markAnswered();
  });
  stream.on("data", (c: Buffer) => chunks.push(c));
  stream.on("error", (err) => (a.error ??= err.message));
  const closed = new Promise<H2Answer>((resolve) =>
    stream.on("close", () => {
      clearTimeout(timer);
      a.data = Buffer.concat(chunks);
      if (!a.timedOut) a.rstCode = stream.rstCode;
      markAnswered();
      resolve(a);
    }),
  );
  const parts = o.body === undefined ? [] : Array.isArray(o.body) ? o.body : [o.body];
  for (const p of parts) stream.write(p);
  if (o.end ?? true) stream.end();
  return { stream, answered, closed };
}

export interface GrpcCaller {
  /** One call; the answer once the stream closed (after `timeoutMs`, default 5 s, the client cancels it). */
  call(body: Buffer | Buffer[], opts?: Omit<H2CallOptions, "body">): Promise<H2Answer>;
  close(): Promise<void>;
}

/** Calls over one session; a session the server sent GOAWAY on (or that failed) is replaced by a new one for the next call. */
export function grpcCaller(port: number): GrpcCaller {
  const open = () => {
    const s = h2Session(port);
    const dead = () => ((s as { sluiceDead?: boolean }).sluiceDead = true);
    s.on("error", dead);
    s.on("goaway", dead);
    s.on("close", dead);
    return s;
  };
  let session = open();
  return {
    call(body, opts = {}) {
      if (session.closed || session.destroyed || (session as { sluiceDead?: boolean }).sluiceDead) session = open();
      return h2Call(session, { timeoutMs: 5000, ...opts, body }).closed;
    },
    close: () => closeSession(session),
  };
}

/** A plaintext client session; errors are kept on it (tests read them), never thrown. */
export function h2Session(port: number, opts: http2.ClientSessionOptions | http2.SecureClientSessionOptions = {}, scheme = "http"): http2.ClientHttp2Session {
  const s = http2.connect(`${scheme}://127.0.0.1:${port}`, opts);
  s.on("error", (err) => ((s as { lastError?: Error }).lastError = err));
  return s;
}

export function closeSession(s: http2.ClientHttp2Session): Promise<void> {
  if (s.closed || s.destroyed) return Promise.resolve();
  return new Promise((resolve) => s.close(() => resolve()));
}

/** Resolves with the server's SETTINGS once they arrived. */
export function remoteSettings(s: http2.ClientHttp2Session): Promise<http2.Settings> {
  if (s.remoteSettings && (s as { sluiceSettingsSeen?: boolean }).sluiceSettingsSeen) return Promise.resolve(s.remoteSettings);
  return new Promise((resolve, reject) => {
    s.once("remoteSettings", (settings) => resolve(settings));
    s.once("error", reject);
  });
}

/** Percent-decoding of grpc-message (PROTOCOL-HTTP2.md): %XX are bytes, the result is UTF-8. */
export function decodeGrpcMessage(raw: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === "%" && /^[0-9A-Fa-f]{2}$/.test(raw.slice(i + 1, i + 3))) {
      bytes.push(parseInt(raw.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(raw[i], "latin1"));
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/** A grpc-message value as the spec allows it on the wire: printable ASCII, '%' only in %XX. */
export const SPEC_ENCODED = /^(?:[\x20-\x24\x26-\x7e]|%[0-9A-Fa-f]{2})*$/;

/** Resolves once the session is connected (node cancels a PING sent before that). */
export function connected(s: http2.ClientHttp2Session): Promise<void> {
  if (!s.connecting) return Promise.resolve();
  return new Promise((resolve, reject) => {
    s.once("connect", () => resolve());
    s.once("error", reject);
  });
}
