// The admin HTTP port of a real `sluice serve` on real Redis: health, readiness, and nothing else.
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rlsClient } from "../helpers/grpc-client.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";

const RULES = `
domain: adm
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
`;

let redis: RedisProcess;
let sluice: SluiceProcess;
let base: string;

beforeAll(async () => {
  redis = await startRedis();
  sluice = await startSluice(["--config", ruleDir({ "adm.yaml": RULES }), "--redis", redis.url]);
  base = `http://127.0.0.1:${sluice.adminPort}`;
});

afterAll(async () => {
  await sluice?.stop();
  await redis?.stop();
});

/** A raw request, so methods and bodies are exactly what the test says. */
function request(method: string, path: string, body?: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const headers = body === undefined ? {} : { "content-length": Buffer.byteLength(body) };
    const req = http.request({ host: "127.0.0.1", port: sluice.adminPort, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("admin port", () => {
  it("binds to loopback unless --admin-host says otherwise, and the listening line gives its port", async () => {
    const listening = await sluice.waitForLog((l) => l.msg === "listening");
    expect(listening).toMatchObject({ adminHost: "127.0.0.1", adminPort: sluice.adminPort });
    expect(sluice.adminPort).toBeGreaterThan(0);
  });

  it("GET /healthz: 200 ok", async () => {
    const res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await res.text()).toBe("ok\n");
  });

  it("GET /readyz: 200 with the rules and the store's state; a query string is ignored", async () => {
    const res = await fetch(`${base}/readyz?verbose=1`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = await res.json();
    expect(body).toEqual({
      ready: true,
      rules: { domains: { adm: 1 }, loadedAt: expect.any(String), watching: true, reloads: 0, errors: 0 },
      store: { kind: "redis", nodes: [{ id: `127.0.0.1:${redis.port}`, state: "up", inFlight: 0, scripts: "function", permissions: { state: "ok" } }] },
    });
    expect(Date.parse(body.rules.loadedAt)).not.toBeNaN();
  });

  it("HEAD gets the headers only", async () => {
    const res = await request("HEAD", "/readyz");
    expect(res.status).toBe(200);
    expect(res.body).toBe("");
    expect(Number(res.headers["content-length"])).toBeGreaterThan(0);
  });

  it("other methods get 405 with Allow, unknown paths 404; a sent body is not read and the connection closes", async () => {
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      const res = await request(method, "/readyz", "x".repeat(100_000));
      expect([method, res.status, res.headers.allow, res.headers.connection]).toEqual([method, 405, "GET, HEAD", "close"]);
    }
    expect((await request("GET", "/")).status).toBe(404);
    expect((await request("GET", "/healthz/x")).status).toBe(404);
    expect((await request("GET", "/metricsz")).status).toBe(404);
  });

  it("a store that goes down shows in /readyz, which stays 200 (the failure policy decides, not readiness)", async () => {
    redis.kill();
    const deadline = Date.now() + 5000;
    let body;
    do {
      const res = await fetch(`${base}/readyz`);
      expect(res.status).toBe(200);
      body = await res.json();
      if (body.store.nodes[0].state === "down") break;
      await sleep(25);
    } while (Date.now() < deadline);
    expect(body.store.nodes).toEqual([{ id: `127.0.0.1:${redis.port}`, state: "down", inFlight: 0, scripts: "function", permissions: { state: "ok" } }]);
    const health = rlsClient(sluice.port);
    expect(await health.health("")).toBe(1); // SERVING: rules are loaded
    health.close();
  });
});

describe("admin settings", () => {
  it("--admin-host is the bind address; a bad --admin-port is a usage error", async () => {
    const s = await startSluice(["--config", ruleDir({ "adm.yaml": RULES }), "--admin-host", "127.0.0.2"]);
    try {
      const listening = await s.waitForLog((l) => l.msg === "listening");
      expect(listening.adminHost).toBe("127.0.0.2");
      expect((await fetch(`http://127.0.0.2:${s.adminPort}/healthz`)).status).toBe(200);
      await expect(fetch(`http://127.0.0.1:${s.adminPort}/healthz`)).rejects.toThrow();
    } finally {
      await s.stop();
    }
    expect(runCli(["serve", "--admin-port", "70000"]).code).toBe(2);
    expect(runCli(["serve"], { SLUICE_ADMIN_PORT: "eighty" }).stderr).toMatch(/SLUICE_ADMIN_PORT must be an integer/);
    expect(runCli(["serve"], { SLUICE_RELOAD_INTERVAL_S: "-1" }).code).toBe(2);
    expect(runCli(["serve"], { SLUICE_SHUTDOWN_GRACE_MS: "soon" }).code).toBe(2);
  });
});
