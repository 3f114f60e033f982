// The admin HTTP transport: a fixed table of routes. GET routes read what is in memory; a body route
// (POST, bounded body: the reference's /json) is answered from the body it was sent. No framework.
// Every answer says it is not to be sniffed, framed or run as a page (a route that is a page sends its own
// policy); a guard (admin-access.ts) may answer before the routes.
import type http from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { ListenError, type ListenSetting } from "./listen-error.js";

export interface AdminResponse {
  status: number;
  /** A string is sent as text/plain, anything else as JSON. */
  body: unknown;
  contentType?: string;
  /** Further headers (lower-case names); a content-security-policy here replaces the default one. */
  headers?: Record<string, string>;
}

/** What a guard sees of a request. */
export interface GuardedRequest {
  host?: string;
  path: string;
  /** The peer's address. */
  peer?: string;
  authorization?: string;
}

/** Runs before the routes: undefined lets the request through, an answer ends it. */
export type AdminGuard = (req: GuardedRequest) => AdminResponse | undefined;

/** Must be cheap: no I/O beyond what is already in memory (or one bounded store read). query: the URL's parameters. */
export type AdminHandler = (query?: URLSearchParams) => AdminResponse | Promise<AdminResponse>;

/** A route that reads a request body: only `method`, at most maxBodyBytes (larger: 413). */
export interface BodyRoute {
  method: "POST";
  maxBodyBytes: number;
  handle(body: Buffer): AdminResponse | Promise<AdminResponse>;
}

interface AdminServerOptions {
  host: string;
  port: number;
  /** Path (without query) -> handler (answered for GET and HEAD only) or body route. */
  routes: Record<string, AdminHandler | BodyRoute>;
  logger: Logger;
  /** Open connections at most (more are closed at once); unbounded by default, as the admin port is loopback. */
  maxConnections?: number;
  guard?: AdminGuard;
  /** How an operator moves this port, for the error when it cannot be had (listen-error.ts). */
  setting: ListenSetting;
}

export interface RunningAdminServer {
  port: number;
  close(): Promise<void>;
}

// Not `import http from "node:http"`: an ESM import builds node:http's whole namespace, whose WebSocket
// getters load node's bundled undici (about 3.5 MiB of RSS, 1.8 of heap) that sluice never uses.
const { createServer } = process.getBuiltinModule("node:http");

/** Probes should answer in milliseconds; a client slower than this is cut off. */
const REQUEST_TIMEOUT_MS = 5000;

export async function startAdminServer(o: AdminServerOptions): Promise<RunningAdminServer> {
  const routes = new Map(Object.entries(o.routes));
  const server = createServer({ requestTimeout: REQUEST_TIMEOUT_MS, headersTimeout: REQUEST_TIMEOUT_MS, maxHeaderSize: 8192 }, (req, res) => {
    const refused = o.guard?.({
      host: req.headers.host,
      path: pathOf(req.url ?? ""),
      peer: req.socket.remoteAddress,
      authorization: req.headers.authorization,
    });
    if (refused) {
      res.shouldKeepAlive = false; // whatever body it sent is not read
      req.resume();
      return send(res, refused);
    }
    handle(routes, req, res, o.logger);
  });
  server.keepAliveTimeout = REQUEST_TIMEOUT_MS;
  server.maxRequestsPerSocket = 100;
  if (o.maxConnections !== undefined) server.maxConnections = o.maxConnections;
  server.on("clientError", (_err, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once("error", (err) => reject(new ListenError(err, o.host, o.port, o.setting)));
    server.listen(o.port, o.host, () => {
      server.removeAllListeners("error");
      resolve();
    });
  });
  server.on("error", (err) => o.logger.error({ err }, "admin server error"));

  return {
    port: (server.address() as AddressInfo).port,
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections(); // probes and scrapes simply retry elsewhere
      });
    },
  };
}

function pathOf(url: string): string {
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}

function handle(routes: Map<string, AdminHandler | BodyRoute>, req: http.IncomingMessage, res: http.ServerResponse, logger: Logger): void {
  const url = req.url ?? "";
  const q = url.indexOf("?");
  const path = pathOf(url);
  const handler = routes.get(path);
  if (handler && typeof handler !== "function") return handleBody(handler, req, res, path, logger);
  // The body is never read: a request that announces one gets its answer and the connection closed.
  if (req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined) {
    res.shouldKeepAlive = false;
  }
  if (!handler) return send(res, { status: 404, body: "not found\n" });
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("allow", "GET, HEAD");
    return send(res, { status: 405, body: "method not allowed\n" });
  }
  let answer;
  try {
    answer = handler(new URLSearchParams(q < 0 ? "" : url.slice(q + 1)));
  } catch (err) {
    return fail(res, err, path, logger);
  }
  Promise.resolve(answer).then(
    (a) => send(res, a),
    (err) => fail(res, err, path, logger),
  );
}

/** Reads the body (bounded) and answers with the route's response. */
function handleBody(route: BodyRoute, req: http.IncomingMessage, res: http.ServerResponse, path: string, logger: Logger): void {
  const refuse = (a: AdminResponse) => {
    res.shouldKeepAlive = false; // the rest of the body is not read
    req.resume();
    send(res, a);
  };
  if (req.method !== route.method) {
    res.setHeader("allow", route.method);
    return refuse({ status: 405, body: "method not allowed\n" });
  }
  const tooLarge = { status: 413, body: `request body larger than ${route.maxBodyBytes} bytes\n` };
  if (Number(req.headers["content-length"]) > route.maxBodyBytes) return refuse(tooLarge);
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size <= route.maxBodyBytes) return void chunks.push(chunk);
    req.off("data", onData);
    refuse(tooLarge);
  };
  req.on("data", onData);
  req.on("error", () => undefined); // an aborted upload: no one to answer
  req.on("end", () => {
    if (size > route.maxBodyBytes) return;
    let answer;
    try {
      answer = route.handle(Buffer.concat(chunks, size));
    } catch (err) {
      return fail(res, err, path, logger);
    }
    Promise.resolve(answer).then(
      (a) => send(res, a),
      (err) => fail(res, err, path, logger),
    );
  });
}

function fail(res: http.ServerResponse, err: unknown, path: string, logger: Logger): void {
  logger.error({ err, path }, "admin handler failed");
  send(res, { status: 500, body: "internal error\n" });
}

/** No answer of these ports is a page to run, frame or sniff, unless its route says otherwise (/ui). */
const SAFE_HEADERS = {
  "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
};

function send(res: http.ServerResponse, a: AdminResponse): void {
  if (res.headersSent || res.destroyed) return;
  const text = typeof a.body === "string" ? a.body : JSON.stringify(a.body) + "\n";
  res.writeHead(a.status, {
    ...SAFE_HEADERS,
    ...a.headers,
    "content-type": a.contentType ?? (typeof a.body === "string" ? "text/plain; charset=utf-8" : "application/json"),
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
  });
  res.end(text); // HEAD: node sends the headers only
}

export interface Readiness {
  ready: boolean;
  /** Shown in the /readyz body as they are. */
  [detail: string]: unknown;
}

/** /healthz: the process answers. /readyz: 200 or 503 from `readiness`, which also fills the JSON body. */
export function healthRoutes(readiness: () => Readiness): Record<string, AdminHandler> {
  return {
    "/healthz": () => ({ status: 200, body: "ok\n" }),
    "/readyz": () => {
      const r = readiness();
      return { status: r.ready ? 200 : 503, body: r };
    },
  };
}
