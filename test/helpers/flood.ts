// A lean load generator for floods: many gRPC calls on one HTTP/2 session with as little client
// work per call as possible (no per-call timers or buffers), so the server is what gets measured.
import http2 from "node:http2";
import { RLS_PATH } from "./h2-call.js";

export interface FloodResult {
  calls: number;
  /** grpc-status -> count; "none" for calls that ended without one. */
  statuses: Record<string, number>;
  ms: number;
}

/**
 * Sends `count` calls, `concurrency` at a time; body(i) gives call i's framed request. Fails once no call has
 * ended for `stallMs` (the server stopped answering): how long the whole flood takes is the host's business.
 */
export function flood(port: number, count: number, concurrency: number, body: (i: number) => Buffer, stallMs: number): Promise<FloodResult> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on("error", () => {});
  const headers = { ":method": "POST", ":path": RLS_PATH, "content-type": "application/grpc", te: "trailers" };
  const statuses: Record<string, number> = {};
  const start = Date.now();
  let next = 0;
  let done = 0;
  return new Promise((resolve, reject) => {
    // Restarted by every call that ends.
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`flood: ${done} of ${count} calls done after ${Date.now() - start} ms, none in the last ${stallMs} ms`));
    }, stallMs);
    const finish = () => {
      clearTimeout(timer);
      session.close();
      resolve({ calls: done, statuses, ms: Date.now() - start });
    };
    const launch = () => {
      if (next >= count) return;
      const i = next++;
      const stream = session.request(headers, { endStream: false });
      let status = "none";
      stream.on("response", (h) => {
        if (h["grpc-status"] !== undefined) status = String(h["grpc-status"]);
      });
      stream.on("trailers", (h) => {
        status = String(h["grpc-status"]);
      });
      stream.on("error", () => {});
      stream.on("close", () => {
        statuses[status] = (statuses[status] ?? 0) + 1;
        timer.refresh();
        if (++done === count) finish();
        else launch();
      });
      stream.resume();
      stream.end(body(i));
    };
    for (let k = 0; k < concurrency; k++) launch();
  });
}
