// Envoy 1.40's gRPC health check (service envoy.service.ratelimit.v3.RateLimitService, as envoy/envoy.yaml asks)
// against sluice whose store goes down. By default sluice stays SERVING: the host stays healthy in /clusters and
// each limit's failure_mode keeps answering. With the reference's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION=true it is
// NOT_SERVING while its store is not up: an instance cut off from a Redis the others reach leaves the rotation
// (/failed_active_hc) and every call is counted exactly by the others; when every instance is cut off, Envoy's
// panic routing still sends the calls to sluice, whose failure_mode answers (without panic routing, Envoy's
// failure_mode_deny answers for every limit instead); and every host comes back once the store does.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  envoyAvailable,
  envoyLogOnFailure,
  httpGet,
  rateLimitEnvoyConfig,
  startEchoUpstream,
  startEnvoy,
  type EchoUpstream,
  type EnvoyProcess,
} from "../helpers/envoy.js";
import { sampleValue, scrape } from "../helpers/prom.js";
// The TCP fault proxy (redis-gate.ts) in front of Redis: one instance's connection to the store cut alone.
import { startRedisGate, type RedisGate } from "../helpers/redis-gate.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

const RULES = `
domain: edge
descriptors:
  - key: generic_key
    value: exact
    failure_mode: allow
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: generic_key
    value: open
    failure_mode: allow
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: generic_key
    value: deny
    failure_mode: deny
    rate_limit: {unit: hour, requests_per_unit: 1000}
`;
const HEALTH_INTERVAL = "0.2s";
/** Several health checks (0.2 s apart) on a busy host. */
const FLAGS_TIMEOUT_MS = 15_000;

/** The sluice cluster's gRPC health check, as envoy/envoy.yaml has it, only faster. */
const sluiceCluster = {
  health_checks: [
    {
      timeout: "1s",
      interval: HEALTH_INTERVAL,
      // Envoy checks an idle cluster only every 60 s unless told otherwise.
      no_traffic_interval: HEALTH_INTERVAL,
      unhealthy_threshold: 2,
      healthy_threshold: 1,
      grpc_health_check: { service_name: "envoy.service.ratelimit.v3.RateLimitService" },
    },
  ],
  // Envoy hands health changes to its load balancers merged over this window (1 s unless set): /clusters shows a
  // change at once, the routing follows it up to a second later. 0: at once, so that a test can send right away.
  common_lb_config: { update_merge_window: "0s" },
};
const routes = ["exact", "open", "deny"].map((v) => ({
  match: { prefix: `/${v}` },
  route: { cluster: "app", rate_limits: [{ actions: [{ generic_key: { descriptor_value: v } }] }] },
}));

/** health_flags of each host of `cluster` in /clusters, by port: "healthy" or e.g. "/failed_active_hc". */
async function healthFlags(envoy: EnvoyProcess, cluster = "sluice"): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  for (const line of (await envoy.clusters()).split("\n")) {
    const m = new RegExp(`^${cluster}::127\\.0\\.0\\.1:(\\d+)::health_flags::(.*)$`).exec(line);
    if (m) out.set(Number(m[1]), m[2]);
  }
  return out;
}

async function waitForFlags(envoy: EnvoyProcess, want: Record<number, string>): Promise<void> {
  let last = new Map<number, string>();
  await until(
    async () => {
      last = await healthFlags(envoy);
      return Object.entries(want).every(([port, flags]) => last.get(Number(port)) === flags);
    },
    FLAGS_TIMEOUT_MS,
    () => `Envoy's health flags ${JSON.stringify([...last])}, wanted ${JSON.stringify(want)}`,
  );
}

async function storeUp(sluice: SluiceProcess, up: boolean): Promise<void> {
  await until(
    async () => {
      const r = await fetch(`http://127.0.0.1:${sluice.adminPort}/readyz`).then((x) => x.json());
      return r.store.nodes.every((n: { state: string }) => (n.state === "up") === up);
    },
    10_000,
    () => `sluice's store did not turn ${up ? "up" : "down"}`,
  );
}

const decisions = async (sluice: SluiceProcess) => {
  const m = await scrape(sluice.adminPort);
  return (
    (sampleValue(m, "sluice_decisions_total", { domain: "edge", code: "OK" }) ?? 0) +
    (sampleValue(m, "sluice_decisions_total", { domain: "edge", code: "OVER_LIMIT" }) ?? 0)
  );
};

async function statuses(port: number, path: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await httpGet(port, path)).status);
  return out;
}

/** Cuts (or restores) the connection of the instance behind `gate` to its Redis: reset now, refused while cut. */
function cut(gate: RedisGate, on: boolean): void {
  gate.refuse(on);
  if (on) gate.reset();
}

describe.runIf(envoyAvailable(import.meta.filename))("Envoy's gRPC health check against sluice whose store is down", () => {
  let upstream: EchoUpstream;
  beforeAll(async () => {
    upstream = await startEchoUpstream();
  });
  afterAll(async () => {
    await upstream?.close();
  });

  describe("by default", () => {
    let redis: RedisProcess;
    let gate: RedisGate;
    let sluice: SluiceProcess;
    let envoy: EnvoyProcess;
    let port: number;

    beforeAll(async () => {
      redis = await startRedis();
      gate = await startRedisGate(redis.port);
      sluice = await startSluice(["--config", ruleDir({ "edge.yaml": RULES }), "--redis", gate.url], { SLUICE_TOP: "off" });
      const { config, listenerPort } = await rateLimitEnvoyConfig({ sluicePorts: [sluice.port], appPort: upstream.port, routes, sluiceCluster });
      port = listenerPort;
      envoy = await startEnvoy(config);
    }, 60_000);
    beforeEach(() => envoyLogOnFailure(envoy));
    afterAll(async () => {
      await envoy?.stop();
      await sluice?.stop();
      await gate?.close();
      await redis?.stop();
    });

    it("stays SERVING while its store is down: the host stays healthy and each limit's failure_mode answers", async () => {
      await waitForFlags(envoy, { [sluice.port]: "healthy" });
      cut(gate, true);
      await storeUp(sluice, false);
      // Three more health checks answered while the store is down, none failed.
      const before = await envoy.stat("cluster.sluice.health_check.success");
      await envoy.waitForStat("cluster.sluice.health_check.success", (v) => v >= before + 3, FLAGS_TIMEOUT_MS);
      expect(await envoy.stat("cluster.sluice.health_check.failure")).toBe(0);
      expect((await healthFlags(envoy)).get(sluice.port)).toBe("healthy");
      // The rule's failure_mode (deny) answers, not Envoy's failure_mode_deny.
      expect(await statuses(port, "/deny", 2)).toEqual([429, 429]);
      expect(await envoy.stat("cluster.app.ratelimit.over_limit")).toBe(2);
      expect(await envoy.stat("cluster.app.ratelimit.error")).toBe(0);
      cut(gate, false);
      await storeUp(sluice, true);
      expect(await statuses(port, "/deny", 1)).toEqual([200]);
      expect(await envoy.stat("cluster.sluice.health_check.failure")).toBe(0);
    }, 60_000);
  });

  describe("with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION=true", () => {
    let redis: RedisProcess;
    let gate: RedisGate;
    let a: SluiceProcess;
    let b: SluiceProcess;
    let envoy: EnvoyProcess;
    let port: number;
    /** The same cluster with Envoy's panic routing off (healthy_panic_threshold 0). */
    let strict: EnvoyProcess;
    let strictPort: number;

    beforeAll(async () => {
      redis = await startRedis();
      gate = await startRedisGate(redis.port);
      const dir = ruleDir({ "edge.yaml": RULES });
      const env = { SLUICE_TOP: "off", REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: "true" };
      // a reaches Redis directly, b through the gate.
      [a, b] = await Promise.all([startSluice(["--config", dir, "--redis", redis.url], env), startSluice(["--config", dir, "--redis", gate.url], env)]);
      const { config, listenerPort } = await rateLimitEnvoyConfig({ sluicePorts: [a.port, b.port], appPort: upstream.port, routes, sluiceCluster });
      port = listenerPort;
      envoy = await startEnvoy(config);
      const noPanic = { ...sluiceCluster, common_lb_config: { ...sluiceCluster.common_lb_config, healthy_panic_threshold: { value: 0 } } };
      const s = await rateLimitEnvoyConfig({ sluicePorts: [a.port, b.port], appPort: upstream.port, routes, sluiceCluster: noPanic });
      strictPort = s.listenerPort;
      strict = await startEnvoy(s.config);
    }, 60_000);
    beforeEach(() => envoyLogOnFailure(envoy, strict));
    afterAll(async () => {
      await envoy?.stop();
      await strict?.stop();
      await a?.stop();
      await b?.stop();
      await gate?.close();
      await redis?.stop();
    });

    it("an instance cut off from Redis leaves the rotation, the others count every call exactly, and it comes back", async () => {
      await waitForFlags(envoy, { [a.port]: "healthy", [b.port]: "healthy" });
      // Nothing said at start while the store was up.
      expect([...a.logs, ...b.logs].filter((l) => l.includes("gRPC health"))).toEqual([]);
      cut(gate, true);
      await waitForFlags(envoy, { [a.port]: "healthy", [b.port]: "/failed_active_hc" });
      const bBefore = await decisions(b);
      // A limit of 5: exact, as every call goes to a (b would have answered `allow` by policy).
      expect(await statuses(port, "/exact", 8)).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
      expect(await decisions(b)).toBe(bBefore);
      expect(await envoy.stat("cluster.app.ratelimit.ok")).toBe(5);
      expect(await envoy.stat("cluster.app.ratelimit.over_limit")).toBe(3);
      cut(gate, false);
      await waitForFlags(envoy, { [a.port]: "healthy", [b.port]: "healthy" });
      expect(b.logs.some((l) => l.includes("gRPC health NOT_SERVING"))).toBe(true);
      expect(b.logs.some((l) => l.includes("gRPC health SERVING: every store node is up again"))).toBe(true);
    }, 60_000);

    it("with Redis down for all, every host is unhealthy, Envoy's panic routing still reaches sluice, and all come back", async () => {
      await waitForFlags(envoy, { [a.port]: "healthy", [b.port]: "healthy" });
      const decided = (await decisions(a)) + (await decisions(b));
      const panicked = await envoy.stat("cluster.sluice.lb_healthy_panic");
      const over = await envoy.stat("cluster.app.ratelimit.over_limit");
      const errors = await envoy.stat("cluster.app.ratelimit.error");
      await redis.stop();
      await waitForFlags(envoy, { [a.port]: "/failed_active_hc", [b.port]: "/failed_active_hc" });
      // Each limit's failure_mode still answers: deny refuses, allow lets through.
      expect(await statuses(port, "/deny", 2)).toEqual([429, 429]);
      expect(await statuses(port, "/open", 2)).toEqual([200, 200]);
      expect(await envoy.stat("cluster.app.ratelimit.over_limit")).toBe(over + 2);
      expect(await envoy.stat("cluster.app.ratelimit.error")).toBe(errors);
      // No healthy host, yet every call went to sluice (Envoy's panic: all hosts are used when too few are healthy).
      expect(await envoy.stat("cluster.sluice.membership_healthy")).toBe(0);
      expect(await envoy.stat("cluster.sluice.lb_healthy_panic")).toBe(panicked + 4);
      expect((await decisions(a)) + (await decisions(b))).toBe(decided + 4);
      // Without panic routing no call reaches sluice: the filter's failure_mode_deny (false) answers for every
      // limit, and the deny rule lets requests through.
      await waitForFlags(strict, { [a.port]: "/failed_active_hc", [b.port]: "/failed_active_hc" });
      expect(await statuses(strictPort, "/deny", 2)).toEqual([200, 200]);
      expect(await strict.stat("cluster.app.ratelimit.error")).toBe(2);
      expect(await strict.stat("cluster.app.ratelimit.failure_mode_allowed")).toBe(2);
      expect((await decisions(a)) + (await decisions(b))).toBe(decided + 4);
      await redis.restart();
      await waitForFlags(envoy, { [a.port]: "healthy", [b.port]: "healthy" });
      await waitForFlags(strict, { [a.port]: "healthy", [b.port]: "healthy" });
    }, 60_000);
  });
});
