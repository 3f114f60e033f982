// A raw HTTP/2 gRPC caller: sends any bytes, returns the grpc-status it got (or that it got none).
import http2 from "node:http2";

export const RLS_PATH = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

export interface RawResult {
  /** grpc-status from the trailers (or a trailers-only answer); undefined = the call ended without one. */
  status?: number;
  message?: string;
  /** HTTP :status of the answer (200 for every gRPC answer). */
  httpStatus?: number;
  /** The response messages' bytes, gRPC framing included. */
  body: Buffer;
  timedOut: boolean;
  /** The stream's error or reset code, when it ended without an answer. */
  error?: string;
}

export interface RawGrpc {
  call(body: Buffer | Buffer[], opts?: { path?: string; headers?: http2.OutgoingHttpHeaders; deadlineMs?: number }): Promise<RawResult>;
  close(): Promise<void>;
}

export function rawGrpc(port: number): RawGrpc {
  let session = connect(port);
  // A session the server sent GOAWAY on (or that failed) takes no new streams: the next call opens another.
  const live = () => {
    if (session.closed || session.destroyed || (session as { sluiceDead?: boolean }).sluiceDead) session = connect(port);
    return session;
  };
  return {
    call(body, opts = {}) {
      return new Promise<RawResult>((resolve) => {
        const stream = live().request({
          ":method": "POST",
          ":path": opts.path ?? RLS_PATH,
          "content-type": "application/grpc",
          te: "trailers",
          ...opts.headers,
        });
        const chunks: Buffer[] = [];
        const result: RawResult = { body: Buffer.alloc(0), timedOut: false };
        const take = (h: http2.IncomingHttpHeaders) => {
          if (h["grpc-status"] !== undefined) {
            result.status = Number(h["grpc-status"]);
            result.message = decodeURIComponent(String(h["grpc-message"] ?? ""));
          }
        };
        const timer = setTimeout(() => {
          result.timedOut = true;
          stream.close(http2.constants.NGHTTP2_CANCEL);
        }, opts.deadlineMs ?? 5000);
        stream.on("response", (h) => {
          result.httpStatus = Number(h[":status"]);
          take(h);
        });
        stream.on("trailers", take);
        stream.on("data", (c: Buffer) => chunks.push(c));
        stream.on("error", (err) => (result.error = err.message)); // a reset stream still ends in 'close'
        stream.on("close", () => {
          clearTimeout(timer);
          if (result.status === undefined && stream.rstCode) result.error ??= `RST_STREAM ${stream.rstCode}`;
          result.body = Buffer.concat(chunks);
          resolve(result);
        });
        const parts = Array.isArray(body) ? body : [body];
        for (const p of parts) stream.write(p);
        stream.end();
      });
    },
    close() {
      return new Promise((resolve) => session.close(() => resolve()));
    },
  };
}

function connect(port: number): http2.ClientHttp2Session {
  const s = http2.connect(`http://127.0.0.1:${port}`);
  const dead = () => ((s as { sluiceDead?: boolean }).sluiceDead = true);
  s.on("error", dead); // reported per stream too
  s.on("goaway", dead);
  s.on("close", dead);
  return s;
}
