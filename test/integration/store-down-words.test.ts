// With Redis down, sluice says so in its own words: the gRPC error of a failure_mode error limit, POST /json's
// 503, /readyz and every log line name the store and what failed; ioredis's or the system's text appears only
// in a `detail` field.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { descriptor, rlsClient } from "../helpers/grpc-client.js";
import { freePort } from "../helpers/ports.js";
import { startRedis } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

/** What ioredis and Node's sockets say, which sluice keeps to `detail` fields. */
const LIBRARY = /Stream isn't writeable|enableOfflineQueue|Connection is closed|max retries per request|ECONNREFUSED|ReplyError|ioredis|at [A-Za-z.]+ \(/;

const RULES = `
domain: err
descriptors:
  - key: k
    failure_mode: error
    rate_limit: {unit: minute, requests_per_unit: 10}
`;

/** A JSON value without its `detail` fields, at any depth. */
function withoutDetail(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutDetail);
  if (v === null || typeof v !== "object") return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([k]) => k !== "detail")
      .map(([k, x]) => [k, withoutDetail(x)]),
  );
}

/** Every log line, each JSON one without its detail fields. */
function logText(s: SluiceProcess): string[] {
  return s.logs.map((l) => {
    try {
      return JSON.stringify(withoutDetail(JSON.parse(l)));
    } catch {
      return l;
    }
  });
}

const running: { stop(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});

describe("Redis down: sluice's own words", () => {
  it("the gRPC error, /readyz and every log line name the store and what failed; the library's text only as detail", async () => {
    const redis = await startRedis();
    running.push(redis);
    const s = await startSluice(["--config", ruleDir({ "err.yaml": RULES }), "--redis", redis.url], { SLUICE_CIRCUIT_FAILURES: "3" });
    running.push(s);
    const c = rlsClient(s.port);
    try {
      expect((await c.shouldRateLimit({ domain: "err", descriptors: [descriptor({ k: "a" })] })).overall_code).toBe(1);
      await redis.stop();
      // Calls while the connection closes, is down, and the circuit is open: each fails with sluice's sentence.
      const messages = new Set<string>();
      await until(
        async () => {
          const err = await c.shouldRateLimit({ domain: "err", descriptors: [descriptor({ k: "a" })] }).then(
            () => undefined,
            (e: { details?: string }) => e,
          );
          if (err?.details) messages.add(err.details.replace(/\d+/g, "N"));
          return s.logs.some((l) => l.includes("rate-limit store circuit open")) && messages.size >= 2;
        },
        15_000,
        () => `errors seen: ${[...messages].join(" | ")}`,
      );
      for (const m of messages) {
        expect(m).toMatch(/^rate-limit store unavailable: Redis N\.N\.N\.N:N (is unreachable \(|did not answer)/);
        expect(m).not.toMatch(LIBRARY);
      }
      const down = await s.waitForLog((l) => l.msg === "rate-limit store down");
      expect(down).toMatchObject({
        store: `127.0.0.1:${redis.port}`,
        reason: "connection closed",
        outcome: "calls are answered by each limit's failure_mode until it is back",
      });
      const ready = await (await fetch(`http://127.0.0.1:${s.adminPort}/readyz`)).text();
      expect(ready).toContain(`"state":"circuit_open"`);
      expect(ready).not.toMatch(LIBRARY);
      await s.stop();
      const lines = logText(s);
      expect(lines.filter((l) => LIBRARY.test(l))).toEqual([]);
      expect([...messages].sort()).toEqual([
        "rate-limit store unavailable: Redis N.N.N.N:N is unreachable (circuit open: calls fail at once until a probe answers)",
        "rate-limit store unavailable: Redis N.N.N.N:N is unreachable (not connected)",
      ]);
    } finally {
      c.close();
    }
  });

  it("under the reference's environment: POST /json answers 503 in sluice's words, and the log says the same", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-runtime-"));
    fs.mkdirSync(path.join(root, "ratelimit", "config"), { recursive: true });
    fs.writeFileSync(
      path.join(root, "ratelimit", "config", "web.yaml"),
      "domain: web\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
    );
    const port = await freePort(); // nothing listens there
    const s = await startSluice([], {
      RUNTIME_ROOT: root,
      RUNTIME_SUBDIRECTORY: "ratelimit",
      REDIS_SOCKET_TYPE: "tcp",
      REDIS_URL: `127.0.0.1:${port}`,
      USE_STATSD: "false",
      SLUICE_LOG_FORMAT: "json",
    });
    running.push(s);
    const { httpPort } = await s.waitForLog((l) => l.msg === "listening");
    const res = await fetch(`http://127.0.0.1:${httpPort}/json`, {
      method: "POST",
      body: JSON.stringify({ domain: "web", descriptors: [{ entries: [{ key: "client", value: "c1" }] }] }),
    });
    const body = await res.text();
    expect(res.status).toBe(503);
    expect(body).toMatch(new RegExp(`^Service Unavailable: rate-limit store unavailable: Redis 127\\.0\\.0\\.1:${port} is unreachable \\(`));
    expect(body).not.toMatch(LIBRARY);
    await s.stop();
    expect(logText(s).filter((l) => LIBRARY.test(l))).toEqual([]);
  });
});
