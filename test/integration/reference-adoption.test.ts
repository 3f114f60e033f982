// A swap from envoyproxy/ratelimit as an SRE does it: sluice started from the reference's environment
// alone (its variables, no flag; SLUICE_ADMIN_PORT only, as two instances on one host each need their own).
// Two instances side by side on one host with their own GRPC_PORT, PORT and DEBUG_PORT; /healthcheck and /json
// on PORT, /rlconfig and /stats on DEBUG_PORT, nothing of sluice's own there: /top, /ui, /explain, /rules
// and the rest on its admin port, on loopback only; gRPC health `ratelimit`; one count with the reference's own keys (written here as the
// reference writes them: INCRBY then EXPIRE); a killed Redis answered UNAVAILABLE, as the reference does.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { freePort } from "../helpers/ports.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { startSluice, type SluiceProcess } from "../helpers/sluice.js";

const RULES = `
domain: web
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 3}
`;
// A rule file's own failure_mode wins over the process-wide default.
const OPEN_RULES = `
domain: open
failure_mode: allow
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 3}
`;

let redis: RedisProcess;
let root: string;
beforeAll(async () => {
  redis = await startRedis();
  root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-adoption-"));
  fs.mkdirSync(path.join(root, "ratelimit", "config"), { recursive: true });
  fs.writeFileSync(path.join(root, "ratelimit", "config", "web.yaml"), RULES);
  fs.writeFileSync(path.join(root, "ratelimit", "config", "open.yaml"), OPEN_RULES);
});
afterAll(async () => {
  await redis?.stop();
});

const running: SluiceProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

interface Ports {
  grpc: number;
  http: number;
  debug: number;
  admin: number;
}

/** A Deployment's environment written for the reference, with this instance's own ports. */
async function referenceOnly(r: RedisProcess): Promise<{ env: Record<string, string>; ports: Ports }> {
  const ports = { grpc: await freePort(), http: await freePort(), debug: await freePort(), admin: await freePort() };
  const env = {
    REDIS_SOCKET_TYPE: "tcp",
    REDIS_URL: `127.0.0.1:${r.port}`,
    RUNTIME_ROOT: root,
    RUNTIME_SUBDIRECTORY: "ratelimit",
    USE_STATSD: "false",
    LOG_LEVEL: "info",
    GRPC_PORT: String(ports.grpc),
    PORT: String(ports.http),
    DEBUG_PORT: String(ports.debug),
    // Under the reference's environment the admin port is 127.0.0.1:8082 unless moved; two instances need two.
    SLUICE_ADMIN_PORT: String(ports.admin),
  };
  return { env, ports };
}

async function start(env: Record<string, string>): Promise<SluiceProcess> {
  const s = await startSluice([], env, { bare: true });
  running.push(s);
  return s;
}

async function get(port: number, urlPath: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${urlPath}`);
  return { status: res.status, body: await res.text() };
}

/** An address of this host that is not loopback (the pod IP, in a pod); undefined on a host with none. */
const OUTSIDE = Object.values(os.networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;

/** Whether a TCP connection to address:port is accepted. */
function accepts(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: address, port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on("error", () => resolve(false));
  });
}

/** sluice's own routes, which name clients or rules (and its health and metrics). */
const ADMIN_ROUTES = ["/top", "/ui", "/explain?domain=web&descriptor=client%3Dx", "/rules", "/healthz", "/readyz", "/metrics"];

const postJson = async (port: number, body: unknown) => {
  const res = await fetch(`http://127.0.0.1:${port}/json`, { method: "POST", body: JSON.stringify(body) });
  return { status: res.status, body: await res.text() };
};

/** The reference's key of an hour limit now, by Redis's clock. */
async function hourKey(base: string): Promise<string> {
  const now = Number((await redis.cli("TIME")).split("\n")[0]);
  return base + Math.floor(now / 3600) * 3600;
}

describe("the reference's environment alone", () => {
  it("two instances side by side: its ports serve what it serves there, sluice's own routes only on the loopback admin port, health 'ratelimit'", async () => {
    const a = await referenceOnly(redis);
    const b = await referenceOnly(redis);
    const [sa, sb] = [await start(a.env), await start(b.env)];
    for (const [s, p] of [
      [sa, a.ports],
      [sb, b.ports],
    ] as const) {
      const line = await s.waitForLog((l) => l.msg === "listening");
      // Its gRPC, HTTP and debug ports, and sluice's admin port on loopback.
      expect([line.port, line.httpPort, line.debugPort, line.adminPort, line.adminHost]).toEqual([p.grpc, p.http, p.debug, p.admin, "127.0.0.1"]);
      expect(await get(p.http, "/healthcheck")).toEqual({ status: 200, body: "OK" });
      // PORT and DEBUG_PORT (on every address) serve none of sluice's own routes.
      for (const port of [p.http, p.debug]) {
        for (const route of ADMIN_ROUTES) expect(await get(port, route), `${port}${route}`).toEqual({ status: 404, body: "not found\n" });
      }
      // The admin port serves them, and only on loopback.
      for (const route of ADMIN_ROUTES) expect((await get(p.admin, route)).status, route).toBe(200);
      expect(JSON.parse((await get(p.admin, "/rules")).body).domains.web).toMatchObject({ rule_count: 1, failure_mode: "error" });
      expect(JSON.parse((await get(p.admin, "/top")).body)).toEqual({ window: "1m", rules: [] });
      expect((await get(p.admin, "/metrics")).body).toContain("sluice_rule_hits_total");
      if (OUTSIDE) expect([await accepts(OUTSIDE, p.http), await accepts(OUTSIDE, p.admin)]).toEqual([true, false]);
      expect((await get(p.debug, "/rlconfig")).body.split("\n").sort()).toEqual([
        "",
        "open.client: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false",
        "web.client: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false",
      ]);
      const pprof = await get(p.debug, "/debug/pprof/");
      expect([pprof.status, pprof.body.startsWith("sluice runs on Node.js")]).toEqual([501, true]);
      expect((await get(p.debug, "/debug/pprof/profile")).status).toBe(501);
      const c = rlsClient(p.grpc);
      try {
        expect([await c.health("ratelimit"), await c.health("")]).toEqual([1, 1]); // SERVING
      } finally {
        c.close();
      }
    }

    // One counter for both (the reference's key on one Redis), through /json on one and gRPC on the other.
    await roomInWindow(3600, 30, redisClock(redis));
    const request = { domain: "web", descriptors: [{ entries: [{ key: "client", value: "pair" }] }] };
    expect((await postJson(a.ports.http, request)).status).toBe(200);
    const c = rlsClient(b.ports.grpc);
    try {
      const res = await c.shouldRateLimit({ domain: "web", descriptors: [descriptor({ client: "pair" })] });
      expect([res.overall_code, res.statuses[0].limit_remaining]).toEqual([OK, 1]);
    } finally {
      c.close();
    }
    expect((await redis.cli("GET", await hourKey("web_client_pair_"))).trim()).toBe("2");
    // /stats: its counters under the reference's names, `name: value` lines.
    expect((await get(a.ports.debug, "/stats")).body).toContain("ratelimit.service.rate_limit.web.client.total_hits: 1\n");
    expect((await get(b.ports.debug, "/stats")).body).toContain("ratelimit.service.rate_limit.web.client.within_limit: 1\n");
  });

  it("shares a counter with the reference's own writes: its INCRBY + EXPIRE counted on, and the reverse", async () => {
    const { env, ports } = await referenceOnly(redis);
    await start(env);
    await roomInWindow(3600, 30, redisClock(redis));
    const key = await hourKey("web_client_swap_");
    // A reference pod counted two hits in this hour (envoyproxy/ratelimit's fixed_cache_impl: INCRBY, EXPIRE unit).
    await redis.cli("INCRBY", key, "2");
    await redis.cli("EXPIRE", key, "3600");
    const c = rlsClient(ports.grpc);
    try {
      const call = () => c.shouldRateLimit({ domain: "web", descriptors: [descriptor({ client: "swap" })] });
      const first = await call();
      expect([first.overall_code, first.statuses[0].limit_remaining]).toEqual([OK, 0]);
      // sluice's hit is the reference's third: the next reference hit would make 4 > 3, refused there too.
      expect((await redis.cli("GET", key)).trim()).toBe("3");
      const ttl = Number(await redis.cli("TTL", key));
      expect(ttl > 3590 && ttl <= 3600).toBe(true);
      expect((await call()).overall_code).toBe(OVER_LIMIT);
      // The refused hit counts, as the reference counts it (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT unset).
      expect((await redis.cli("GET", key)).trim()).toBe("4");
      expect((await redis.cli("INCRBY", key, "1")).trim()).toBe("5");
    } finally {
      c.close();
    }
  });

  it("Redis killed: ShouldRateLimit answers UNAVAILABLE (Envoy's failure_mode_deny decides), /json 503", async () => {
    const own = await startRedis();
    try {
      const { env, ports } = await referenceOnly(own);
      const s = await start(env);
      const c = rlsClient(ports.grpc);
      try {
        const call = () => c.shouldRateLimit({ domain: "web", descriptors: [descriptor({ client: "down" })] });
        expect((await call()).overall_code).toBe(OK);
        own.kill();
        await s.waitForLog((l) => l.msg === "rate-limit store down", 15_000);
        const err = await call().then(
          () => undefined,
          (e: grpc.ServiceError) => e,
        );
        expect(err?.code).toBe(grpc.status.UNAVAILABLE);
        expect(err?.details).toMatch(/^rate-limit store unavailable: /);
        const json = await postJson(ports.http, { domain: "web", descriptors: [{ entries: [{ key: "client", value: "down" }] }] });
        expect(json.status).toBe(503);
        // A request no limit matches needs no store: still answered.
        expect((await c.shouldRateLimit({ domain: "web", descriptors: [descriptor({ other: "x" })] })).overall_code).toBe(OK);
        // A rule that names its failure_mode keeps it: allowed, the full limit left.
        const open = await c.shouldRateLimit({ domain: "open", descriptors: [descriptor({ client: "down" })] });
        expect([open.overall_code, open.statuses[0].limit_remaining]).toEqual([OK, 3]);
      } finally {
        c.close();
      }
    } finally {
      await own.stop();
    }
  });
});
