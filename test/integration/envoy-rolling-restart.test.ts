// A rolling restart behind a real Envoy 1.40: two sluice instances on one redis-server in Envoy's "sluice"
// cluster, with its gRPC health check, under steady load. Each instance in turn gets SIGTERM and is started
// again on its port once it exited; the next goes only when Envoy sees the first healthy again. Envoy's
// HTTP/2 client meets sluice's NOT_SERVING, GOAWAY and drain: no call may fail (ratelimit.error and
// failure_mode_allowed stay 0), and the Redis counter must equal the requests Envoy let through.
import http from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { envoyAvailable, envoyLogOnFailure, httpGet, rateLimitEnvoyConfig, startEchoUpstream, startEnvoy } from "../helpers/envoy.js";
import { freePort } from "../helpers/ports.js";
import { startRedis } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { getWindowCount } from "../helpers/window-key.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { sleep } from "../helpers/wait.js";

const HEALTH_SERVICE = "envoy.service.ratelimit.v3.RateLimitService";
/** Envoy's health check in the test: every 250 ms, unhealthy after 2 failures, healthy after 1 success. */
const HC_INTERVAL_MS = 250;
const HC_UNHEALTHY = 2;
/** Above the interval plus a check's answer time: Envoy sees NOT_SERVING before the port closes. */
const DRAIN_DELAY_MS = 2000;
/** Requests a second through Envoy, as a steady open loop. */
const RATE = 200;
/** Far above the load: every request passes, and each one is counted in the hour's window. */
const RULES = `
domain: edge
descriptors:
  - key: generic_key
    value: rolling
    rate_limit: { unit: hour, requests_per_unit: 1000000 }
`;
/** `sluice explain --domain edge --descriptor generic_key=rolling` prints it. */
const KEY = "sluice:{edge:generic_key=rolling}:fw3600";

/** An open-loop load at `rate` requests a second over a keep-alive pool; what each request got. */
class SteadyLoad {
  readonly statuses = new Map<string, number>();
  sent = 0;
  private readonly pending = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

  constructor(
    private readonly port: number,
    private readonly rate: number,
  ) {}

  start(): void {
    const started = performance.now();
    this.timer = setInterval(() => {
      const due = Math.floor(((performance.now() - started) / 1000) * this.rate);
      while (this.sent < due) this.one();
    }, 10);
  }

  private one(): void {
    this.sent++;
    const p = httpGet(this.port, "/", {}, { agent: this.agent }).then(
      (r) => this.count(String(r.status)),
      (err: Error) => this.count(`error: ${err.message}`),
    );
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  private count(what: string): void {
    this.statuses.set(what, (this.statuses.get(what) ?? 0) + 1);
  }

  /** Stops sending; resolves once every request sent has its answer. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.pending]);
    this.agent.destroy();
  }
}

/** What one rolling restart gave. */
interface Rolled {
  sent: number;
  answers: Record<string, number>;
  /** Envoy's stats: cluster.app.ratelimit.* and cluster.sluice.*, by name without the prefix "cluster.". */
  stats: Map<string, number>;
  /** The hour's count in Redis. */
  counted: number;
  /** Per instance: SIGTERM to Envoy's marking it unhealthy, to its exit, and its drain (from its log: "draining" to "stopped"). */
  drains: { unhealthyMs: number; exitMs: number; drainMs: number }[];
}

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** Two sluice instances on one Redis behind Envoy's health-checked cluster; each restarted in turn under load. */
async function rollingRestart(drainDelayMs: number): Promise<Rolled> {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  const upstream = await startEchoUpstream();
  cleanup.push(() => upstream.close());
  const rules = ruleDir({ "edge.yaml": RULES });
  const ports = [await freePort(), await freePort()];
  const instances: SluiceProcess[] = [];
  cleanup.push(async () => {
    for (const s of instances) await s.stop();
  });
  const start = (port: number) =>
    startSluice(["--config", rules, "--redis", redis.url, "--port", String(port)], {
      // The host is shared and busy: a slow Redis answer must not turn into a failure-policy answer,
      // which would let a request through uncounted.
      SLUICE_STORE_TIMEOUT_MS: "5000",
      SLUICE_SHUTDOWN_GRACE_MS: "10000",
      SLUICE_DRAIN_DELAY_MS: String(drainDelayMs),
    });
  for (const port of ports) instances.push(await start(port));
  const { config, listenerPort } = await rateLimitEnvoyConfig({
    sluicePorts: ports,
    appPort: upstream.port,
    rateLimits: [{ actions: [{ generic_key: { descriptor_value: "rolling" } }] }],
    // A generous timeout: on a busy host a slow answer must not be what fails a call.
    filter: { timeout: "5s", failure_mode_deny: false },
    sluiceCluster: {
      health_checks: [
        {
          timeout: "1s",
          interval: `${HC_INTERVAL_MS / 1000}s`,
          no_traffic_interval: `${HC_INTERVAL_MS / 1000}s`,
          unhealthy_threshold: HC_UNHEALTHY,
          healthy_threshold: 1,
          grpc_health_check: { service_name: HEALTH_SERVICE },
        },
      ],
    },
  });
  const envoy = await startEnvoy(config);
  cleanup.push(() => envoy.stop());
  envoyLogOnFailure(envoy);
  const healthy = (n: number) => envoy.waitForStat("cluster.sluice.membership_healthy", (v) => v === n, 30_000);
  await healthy(2);

  // The hour's window must hold the whole run: its key expires at the hour's end.
  await roomInWindow(3600, 120, redisClock(redis));
  const load = new SteadyLoad(listenerPort, RATE);
  load.start();
  await sleep(1000);
  const drains: Rolled["drains"] = [];
  for (let i = 0; i < instances.length; i++) {
    const old = instances[i];
    const t0 = performance.now();
    let unhealthyMs = -1;
    const seenUnhealthy = healthy(1).then(() => (unhealthyMs = Math.round(performance.now() - t0)));
    expect(await old.stop()).toBe(0);
    const exitMs = Math.round(performance.now() - t0);
    await seenUnhealthy;
    const at = (msg: string) => old.waitForLog((l) => l.msg === msg, 0).then((l) => l.time as number);
    const drainMs = (await at("stopped")) - (drainDelayMs > 0 ? await at("draining") : await at("shutting down"));
    drains.push({ unhealthyMs, exitMs, drainMs });
    instances[i] = await start(ports[i]);
    await healthy(2);
    await sleep(500);
  }
  await load.stop();
  const stats = new Map(
    [...(await envoy.stats())].filter(([k]) => /^cluster\.(sluice|app\.ratelimit)\./.test(k)).map(([k, v]) => [k.slice("cluster.".length), v]),
  );
  const counted = Number(await getWindowCount(redis.cli, KEY));
  return { sent: load.sent, answers: Object.fromEntries(load.statuses), stats, counted, drains };
}

/**
 * An Envoy stat. The rate-limit filter's (app.ratelimit.*) appear with their first count; any other must exist,
 * so that a misspelt name fails instead of reading 0.
 */
function stat(r: Rolled, name: string): number {
  const v = r.stats.get(name);
  if (v !== undefined) return v;
  if (name.startsWith("app.ratelimit.")) return 0;
  throw new Error(`Envoy has no stat cluster.${name}`);
}

function report(r: Rolled): string {
  const nonZero = [...r.stats].filter(([, v]) => v !== 0).map(([k, v]) => `${k}=${v}`);
  return `${r.sent} requests, answers ${JSON.stringify(r.answers)}, Redis ${r.counted}, drains ${JSON.stringify(r.drains)}\n${nonZero.join("\n")}`;
}

describe.runIf(envoyAvailable(import.meta.filename))("a rolling restart of two sluice instances behind a real Envoy 1.40", () => {
  it(`with SLUICE_DRAIN_DELAY_MS ${DRAIN_DELAY_MS}, under ${RATE} requests/s: no call fails, the counter equals the requests let through`, async () => {
    const r = await rollingRestart(DRAIN_DELAY_MS);
    console.log(`rolling restart, drain delay ${DRAIN_DELAY_MS} ms: ${report(r)}`);
    expect(r.answers).toEqual({ "200": r.sent });
    expect(stat(r, "app.ratelimit.error")).toBe(0);
    expect(stat(r, "app.ratelimit.failure_mode_allowed")).toBe(0);
    expect(stat(r, "app.ratelimit.ok")).toBe(r.sent);
    // Every call reached sluice, was counted once and answered: none lost or reset on the way.
    expect(r.counted).toBe(r.sent);
    expect(stat(r, "sluice.upstream_cx_connect_fail")).toBe(0);
    expect(stat(r, "sluice.upstream_rq_pending_failure_eject")).toBe(0);
    expect(stat(r, "sluice.upstream_rq_rx_reset")).toBe(0);
    expect(stat(r, "sluice.upstream_rq_tx_reset")).toBe(0);
  }, 180_000);

  it("without a drain delay (sluice closes its port at once), Envoy's calls meet the closed port and are let through unlimited", async () => {
    const r = await rollingRestart(0);
    console.log(`rolling restart, no drain delay: ${report(r)}`);
    // The control: the same run fails where the delay is missing, so the test above can fail.
    expect(r.answers).toEqual({ "200": r.sent });
    const failed = stat(r, "app.ratelimit.failure_mode_allowed");
    expect(failed).toBeGreaterThan(0);
    expect(stat(r, "app.ratelimit.error")).toBe(failed);
    expect(stat(r, "app.ratelimit.ok")).toBe(r.sent - failed);
    // What failed was never counted: those requests passed unlimited.
    expect(r.counted).toBe(r.sent - failed);
  }, 180_000);
});
