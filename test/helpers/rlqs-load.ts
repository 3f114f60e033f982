// Load for RLQS tests and the rlqs bench: an open-loop HTTP/1.1 generator aimed at one Envoy listener, and an
// upstream that records when each admitted request arrived and which generator sent it (x-from).
import http from "node:http";
import { sleep } from "./wait.js";

export interface Arrival {
  atMs: number;
  from: string;
  bucket: string;
}

export interface CountingUpstream {
  port: number;
  arrivals: Arrival[];
  close(): Promise<void>;
}

/** Answers 200 to everything and records each arrival (time, x-from, x-bucket). */
export async function startCountingUpstream(): Promise<CountingUpstream> {
  const arrivals: Arrival[] = [];
  const server = http.createServer((req, res) => {
    arrivals.push({ atMs: Date.now(), from: String(req.headers["x-from"] ?? ""), bucket: String(req.headers["x-bucket"] ?? "") });
    req.resume();
    req.on("end", () => res.end("ok"));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    arrivals,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface Load {
  counts: { ok: number; limited: number; other: number };
  /** Latency of each answered request, ms (kept only when asked). */
  latencies: number[];
  stop(): Promise<void>;
}

/** About `perSecond` requests a second to 127.0.0.1:port until stopped (open loop); answers counted by status. */
export function startLoad(port: number, perSecond: number, headers: Record<string, string>, o: { keepLatencies?: boolean; maxSockets?: number } = {}): Load {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.maxSockets ?? 16 });
  const counts = { ok: 0, limited: 0, other: 0 };
  const latencies: number[] = [];
  let running = true;
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = http.request({ host: "127.0.0.1", port, path: "/", headers, agent, timeout: 5000 }, (res) => {
        res.resume();
        res.on("end", () => {
          if (o.keepLatencies) latencies.push(performance.now() - t0);
          if (res.statusCode === 200) counts.ok++;
          else if (res.statusCode === 429) counts.limited++;
          else counts.other++;
          resolve();
        });
      });
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", () => {
        counts.other++;
        resolve();
      });
      req.end();
    });
  const tickMs = 50;
  const inflight = new Set<Promise<void>>();
  const loop = (async () => {
    let owed = 0;
    while (running) {
      owed += (perSecond * tickMs) / 1000;
      const n = Math.floor(owed);
      owed -= n;
      for (let i = 0; i < n; i++) {
        const p = one().then(() => {
          inflight.delete(p);
        });
        inflight.add(p);
      }
      await sleep(tickMs);
    }
  })();
  return {
    counts,
    latencies,
    stop: async () => {
      running = false;
      await loop;
      await Promise.race([Promise.all(inflight), sleep(6000)]);
      agent.destroy();
    },
  };
}
