// A node:http2 server with what the transport contract (src/server/transport.ts) asks of the HTTP/2
// layer, for candidates that bring only a request handler (connect): TLS / mTLS from the ServerTls
// record with its reloads, the stream cap, the body timeout, keepalive pings, SO_REUSEPORT, and a
// graceful shutdown (GOAWAY, then the in-flight streams get graceMs, then the sessions are destroyed).
import http2 from "node:http2";

const { NGHTTP2_CANCEL } = http2.constants;

/**
 * TLS from the ServerTls record (server/tls.ts): the files in force now, and every reload that loaded
 * (a reload that fails is logged there and the previous certificates keep serving).
 */
function createServer(tls, options, handler) {
  if (!tls) return http2.createServer(options, handler);
  if (typeof tls.secureContextOptions !== "function" || typeof tls.onChange !== "function") {
    throw new Error("ServerTls has no secureContextOptions()/onChange(): this build's server/tls.ts predates node:tls servers");
  }
  const server = http2.createSecureServer({ ...options, ...tls.secureContextOptions() }, handler);
  server.on("secureConnection", (socket) => socket.on("error", () => undefined));
  const stop = tls.onChange(() => {
    const { cert, key, ca } = tls.secureContextOptions();
    server.setSecureContext({ cert, key, ca });
  });
  server.on("close", stop);
  return server;
}

/**
 * Starts listening; `handler(req, res)` is the compatibility-API request handler. Returns
 * { port, server, shutdown(graceMs) -> Promise<boolean> }.
 */
export async function startH2(o, handler) {
  const bodyTimeoutMs = o.bodyTimeoutMs ?? 10_000;
  const keepalive = o.keepalive ?? { intervalMs: 60_000, timeoutMs: 20_000 };
  // Streams whose request body has not ended, in arrival order (so the oldest come first).
  const awaitingBody = new Map();
  function bodyEnded() {
    awaitingBody.delete(this);
  }
  // Streams not yet closed, for a shutdown that runs out of time.
  const open = new Set();
  function streamClosed() {
    open.delete(this);
  }
  const wrapped = (req, res) => {
    open.add(req.stream);
    req.stream.once("close", streamClosed);
    if (!req.readableEnded) {
      awaitingBody.set(req, performance.now() + bodyTimeoutMs);
      req.once("end", bodyEnded);
      req.once("close", bodyEnded);
    }
    handler(req, res);
  };
  const server = createServer(
    o.tls,
    {
      settings: { maxConcurrentStreams: o.maxConcurrentStreams ?? 1000 },
      // As grpc-js: Node's session memory check degrades badly when it trips; the stream cap bounds instead.
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
    },
    wrapped,
  );
  server.setTimeout(0);

  const sessions = new Map(); // session -> last activity (ms)
  server.on("session", (session) => {
    sessions.set(session, performance.now());
    session.on("stream", () => sessions.set(session, performance.now()));
    session.on("close", () => sessions.delete(session));
    session.on("error", () => undefined);
  });

  // One sweep for all streams instead of a timer per call.
  const sweep = setInterval(
    () => {
      const now = performance.now();
      for (const [req, deadline] of awaitingBody) {
        if (deadline > now) break;
        awaitingBody.delete(req);
        req.stream.close(NGHTTP2_CANCEL);
      }
    },
    Math.max(10, Math.min(1000, bodyTimeoutMs / 2)),
  );
  sweep.unref();

  const pinger = setInterval(
    () => {
      const now = performance.now();
      for (const [session, last] of sessions) {
        if (now - last < keepalive.intervalMs || session.closed || session.destroyed) continue;
        sessions.set(session, now);
        let acked = false;
        const timer = setTimeout(() => acked || session.destroy(), keepalive.timeoutMs);
        timer.unref();
        const sent = session.ping((err) => {
          acked = !err;
          clearTimeout(timer);
          if (err) session.destroy();
        });
        if (!sent) clearTimeout(timer);
      }
    },
    Math.max(100, Math.min(keepalive.intervalMs, 10_000)),
  );
  pinger.unref();

  const port = await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: o.host, port: o.port, reusePort: o.reusePort === true }, () => {
      server.off("error", reject);
      resolve(server.address().port);
    });
  });

  return {
    port,
    server,
    /**
     * GOAWAY to every session (no new streams); in-flight streams get graceMs, then each is cut with
     * RST_STREAM CANCEL (a client sees CANCELLED) and a session still open a second later is destroyed.
     */
    shutdown(graceMs) {
      clearInterval(sweep);
      clearInterval(pinger);
      const closed = new Promise((resolve) => server.close(() => resolve(true)));
      for (const session of sessions.keys()) session.close();
      return new Promise((resolve) => {
        const force = setTimeout(() => {
          for (const stream of open) stream.close(NGHTTP2_CANCEL);
          setTimeout(() => {
            for (const session of sessions.keys()) session.destroy();
          }, 1000).unref();
          resolve(false);
        }, graceMs);
        force.unref();
        closed.then(() => {
          clearTimeout(force);
          resolve(true);
        });
      });
    },
  };
}
