// Graceful shutdown on SIGTERM with calls in flight: a real redis-server behind a gate that stalls it,
// so the calls are provably inside sluice (waiting on the store) when the signal arrives.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { startRedisGate, type RedisGate } from "../helpers/redis-gate.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

const RULES = `
domain: drain
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 31}
`;

let redis: RedisProcess;
const gates: RedisGate[] = [];
const clients: RlsClient[] = [];

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  for (const c of clients) c.close();
  for (const g of gates) await g.close();
  await redis?.stop();
});

/** A sluice on Redis through a gate, with one call done so the connections are up. */
async function sluiceBehindGate(env: Record<string, string>) {
  const gate = await startRedisGate(redis.port);
  gates.push(gate);
  const sluice = await startSluice(["--config", ruleDir({ "drain.yaml": RULES }), "--redis", gate.url], {
    SLUICE_STORE_TIMEOUT_MS: "30000", // the store stalls on purpose; calls must wait, not fail
    ...env,
  });
  const client = rlsClient(sluice.port);
  clients.push(client);
  const user = `u${gates.length}`;
  const call = () => client.shouldRateLimit({ domain: "drain", descriptors: [descriptor({ user })] }, 30_000);
  expect((await call()).overall_code).toBe(OK);
  // The permission check's EVAL at connect (store/acl-check.ts), then the call.
  expect(gate.scriptCalls()).toBe(2);
  return { gate, sluice, client, call };
}

describe("SIGTERM during traffic", () => {
  it("every call in flight gets its answer, new connections are refused, readyz and health turn, exit 0", async () => {
    const { gate, sluice, client, call } = await sluiceBehindGate({ SLUICE_SHUTDOWN_GRACE_MS: "30000" });
    const healthSeen: number[] = [];
    const healthEnded = client.watchHealth("", (s) => healthSeen.push(s));
    await until(() => healthSeen.length === 1, 10_000, "health watch");

    gate.hold();
    const inFlight = Array.from({ length: 40 }, () =>
      call().then(
        (r) => r.overall_code,
        (err: { code: number }) => `error ${err.code}`,
      ),
    );
    await until(() => gate.scriptCalls() === 42, 10_000, "40 calls at the store");

    sluice.proc.kill("SIGTERM");
    await sluice.waitForLog((l) => l.msg === "shutting down");
    const ready = await fetch(`http://127.0.0.1:${sluice.adminPort}/readyz`);
    expect(ready.status).toBe(503);
    expect((await ready.json()).ready).toBe(false);
    const late = rlsClient(sluice.port);
    await expect(late.shouldRateLimit({ domain: "drain", descriptors: [descriptor({ user: "late" })] }, 5000)).rejects.toMatchObject({
      code: 14 /* UNAVAILABLE: not accepted */,
    });
    late.close();
    await healthEnded;
    expect(healthSeen).toEqual([1, 2]); // SERVING, then NOT_SERVING once shutdown started

    gate.release();
    const codes = await Promise.all(inFlight);
    // Limit 31, one used before: all 40 answered and counted exactly.
    expect(codes.filter((c) => c === OK).length).toBe(30);
    expect(codes.filter((c) => c === OVER_LIMIT).length).toBe(10);
    expect(await sluice.exited).toBe(0);
    expect(sluice.logs.some((l) => l.includes('"msg":"stopped"'))).toBe(true);
  });

  it("calls that outlive SLUICE_SHUTDOWN_GRACE_MS are cancelled and sluice still exits 0", async () => {
    const { gate, sluice, call } = await sluiceBehindGate({ SLUICE_SHUTDOWN_GRACE_MS: "300" });
    gate.hold(); // never released: the store hangs
    const inFlight = Array.from({ length: 5 }, () =>
      call().then(
        (r) => r.overall_code,
        (err: { code: number }) => err.code,
      ),
    );
    await until(() => gate.scriptCalls() === 7, 10_000, "5 calls at the store");
    const started = Date.now();
    sluice.proc.kill("SIGTERM");
    expect(await sluice.exited).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000); // grace 300 ms + the bounded store close; generous
    const codes = await Promise.all(inFlight);
    for (const c of codes) expect([1 /* CANCELLED */, 14 /* UNAVAILABLE */]).toContain(c);
    expect(sluice.logs.some((l) => l.includes("outlived the grace period"))).toBe(true);
  });
});

describe("SIGTERM with SLUICE_DRAIN_DELAY_MS", () => {
  it("health turns NOT_SERVING at once; calls and new connections are served until the delay ends, then the port closes", async () => {
    const delayMs = 1500;
    const sluice = await startSluice(["--config", ruleDir({ "drain.yaml": RULES })], { SLUICE_DRAIN_DELAY_MS: String(delayMs) });
    const before = rlsClient(sluice.port);
    clients.push(before);
    const ask = (c: RlsClient, user: string) => c.shouldRateLimit({ domain: "drain", descriptors: [descriptor({ user })] }, 5000).then((r) => r.overall_code);
    expect(await before.health("envoy.service.ratelimit.v3.RateLimitService")).toBe(1);
    expect(await ask(before, "a")).toBe(OK);

    sluice.proc.kill("SIGTERM");
    const down = await sluice.waitForLog((l) => l.msg === "shutting down");
    expect(down.drainDelayMs).toBe(delayMs);
    // A health checker (Envoy's) sees NOT_SERVING on the connection it has and on a new one; calls still pass.
    expect(await before.health("envoy.service.ratelimit.v3.RateLimitService")).toBe(2);
    expect((await fetch(`http://127.0.0.1:${sluice.adminPort}/readyz`)).status).toBe(503);
    const during = rlsClient(sluice.port);
    clients.push(during);
    expect(await ask(during, "b")).toBe(OK);
    expect(await during.health("")).toBe(2);
    expect(await ask(before, "a")).toBe(OK);
    expect(sluice.logs.some((l) => l.includes('"msg":"draining"'))).toBe(false);

    const draining = await sluice.waitForLog((l) => l.msg === "draining", delayMs + 5000);
    expect(draining.time - down.time).toBeGreaterThanOrEqual(delayMs - 5);
    expect(await sluice.exited).toBe(0);
    const after = rlsClient(sluice.port);
    clients.push(after);
    await expect(ask(after, "c")).rejects.toMatchObject({ code: 14 /* UNAVAILABLE: nothing listens */ });
  });
});
