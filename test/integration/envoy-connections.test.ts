// Envoy's connection pattern against sluice, with Envoy's own binary: 2,000 concurrent client requests through
// one Envoy (2 workers) put their rate-limit calls on a few HTTP/2 connections with hundreds of streams each.
// Each run sends two bursts (the first on cold connections to sluice, the second on warm ones) and checks that
// every client got what sluice or the failure mode said, with the counter exact, and that each failed call is
// one Envoy failed itself: past max_requests (active overflow), past max_pending_requests (pending overflow),
// or a stream sluice's HTTP/2 layer refused because Envoy put more on a new connection than sluice's
// SETTINGS_MAX_CONCURRENT_STREAMS before those SETTINGS arrived. docs/operating.md, "Envoy's connections and
// sluice's stream bounds", holds the figures.
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  envoyAvailable,
  envoyLogOnFailure,
  rateLimitEnvoyConfig,
  startEchoUpstream,
  startEnvoy,
  type EchoUpstream,
  type EnvoyProcess,
} from "../helpers/envoy.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { sampleValue, scrape, type Sample } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { getWindowCount } from "../helpers/window-key.js";

const CLIENTS = 2000;
/** Per hour: the first burst of 2,000 passes whole, the second crosses it (1,000 pass, 1,000 are refused). */
const LIMIT = 3000;
const RULES = `
domain: edge
descriptors:
  - key: generic_key
    rate_limit: { unit: hour, requests_per_unit: ${LIMIT} }
`;
const keyOf = (value: string) => `sluice:{edge:generic_key=${value}}:fw3600`;

type Obj = Record<string, any>;

/** envoy/envoy.yaml's circuit breakers on the sluice cluster. */
const SHIPPED_BREAKERS = { max_connections: 64, max_pending_requests: 256, max_requests: 4096, max_retries: 0 };

interface Burst {
  statuses: Record<string, number>;
}

/** CLIENTS requests at once, one per kept-alive connection (opened beforehand on a route with no limit). */
async function burst(port: number, agent: http.Agent, path: string): Promise<Burst> {
  const one = () =>
    new Promise<string>((resolve) => {
      const req = http.get({ host: "127.0.0.1", port, path, agent, timeout: 60_000 }, (res) => {
        res.resume();
        res.on("end", () => resolve(String(res.statusCode)));
      });
      req.on("timeout", () => req.destroy(new Error("no answer in 60 s")));
      req.on("error", (err) => resolve(`error: ${err.message}`));
    });
  const answers = await Promise.all(Array.from({ length: CLIENTS }, one));
  const statuses: Record<string, number> = {};
  for (const a of answers) statuses[a] = (statuses[a] ?? 0) + 1;
  return { statuses };
}

/** sluice's counters that a stream or transport problem would move, summed over their labels. */
function sluiceErrors(samples: Sample[]): Record<string, number> {
  const sum = (name: string) => samples.filter((s) => s.name === name).reduce((a, s) => a + s.value, 0);
  return {
    request_errors: sum("sluice_request_errors_total"),
    streams_reset: sum("sluice_grpc_streams_reset_total"),
    connections_closed: sum("sluice_grpc_connections_closed_total"),
  };
}

const decisions = (samples: Sample[]) =>
  (sampleValue(samples, "sluice_decisions_total", { domain: "edge", code: "OK" }) ?? 0) +
  (sampleValue(samples, "sluice_decisions_total", { domain: "edge", code: "OVER_LIMIT" }) ?? 0);

/** Envoy's stats of the sluice cluster and of the filter (under the route's cluster, app), "cluster." cut off. */
async function envoyStats(envoy: EnvoyProcess): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [k, v] of await envoy.stats()) if (/^cluster\.(sluice|app\.ratelimit)\./.test(k)) out[k.slice("cluster.".length)] = v;
  return out;
}

interface Run {
  first: Burst;
  second: Burst;
  /** Envoy's stats after the first burst (cold connections to sluice). */
  afterFirst: Record<string, number>;
  envoy: Record<string, number>;
  counted: number;
  decided: number;
  errors: Record<string, number>;
}

describe.runIf(envoyAvailable(import.meta.filename))("2,000 concurrent requests through a real Envoy 1.40: its connections to sluice", () => {
  let redis: RedisProcess;
  let upstream: EchoUpstream;
  let sluice: SluiceProcess;
  let narrow: SluiceProcess;
  const rules = ruleDir({ "edge.yaml": RULES });

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startEchoUpstream();
    // A slow Redis answer on a busy host must not become a failure-policy answer (uncounted).
    const env = { SLUICE_STORE_TIMEOUT_MS: "10000" };
    sluice = await startSluice(["--config", rules, "--redis", redis.url], env);
    narrow = await startSluice(["--config", rules, "--redis", redis.url], { ...env, SLUICE_MAX_CONCURRENT_STREAMS: "100" });
  }, 60_000);

  afterAll(async () => {
    await sluice?.stop();
    await narrow?.stop();
    await upstream?.close();
    await redis?.stop();
  });

  /**
   * One Envoy on `target` with `breakers` on its sluice cluster (and, if given, its HTTP/2 max_concurrent_streams);
   * two bursts (cold, then warm connections to sluice).
   */
  async function run(target: SluiceProcess, value: string, breakers: Obj | undefined, maxConcurrentStreams?: number): Promise<Run> {
    const { config, listenerPort } = await rateLimitEnvoyConfig({
      sluicePorts: [target.port],
      appPort: upstream.port,
      routes: [
        { name: "warm", match: { prefix: "/warm" }, route: { cluster: "app" } },
        { name: "limited", match: { prefix: "/" }, route: { cluster: "app", rate_limits: [{ actions: [{ generic_key: { descriptor_value: value } }] }] } },
      ],
      filter: { timeout: "30s" },
      sluiceCluster: breakers ? { circuit_breakers: { thresholds: [{ priority: "DEFAULT", ...breakers }] } } : {},
    });
    // The app cluster must not be what limits: a queue far above the load, on at most 256 connections (2,000
    // connections opened at once overflow the echo server's accept backlog).
    const clusters = config.static_resources.clusters as Obj[];
    const app = clusters.find((c) => c.name === "app")!;
    app.circuit_breakers = { thresholds: [{ priority: "DEFAULT", max_connections: 256, max_pending_requests: 100_000, max_requests: 100_000 }] };
    if (maxConcurrentStreams !== undefined) {
      const options = Object.values(clusters.find((c) => c.name === "sluice")!.typed_extension_protocol_options as Obj)[0];
      options.explicit_http_config.http2_protocol_options = { max_concurrent_streams: maxConcurrentStreams };
    }
    const envoy = await startEnvoy(config);
    envoyLogOnFailure(envoy);
    const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS, maxFreeSockets: CLIENTS });
    try {
      await roomInWindow(3600, 60, redisClock(redis));
      const before = await scrape(target.adminPort);
      const warm = await burst(listenerPort, agent, "/warm");
      expect(warm.statuses).toEqual({ "200": CLIENTS });
      const first = await burst(listenerPort, agent, "/limited");
      const afterFirst = await envoyStats(envoy);
      const second = await burst(listenerPort, agent, "/limited");
      const after = await scrape(target.adminPort);
      const errBefore = sluiceErrors(before);
      const errAfter = sluiceErrors(after);
      return {
        first,
        second,
        afterFirst,
        envoy: await envoyStats(envoy),
        counted: Number((await getWindowCount(redis.cli, keyOf(value))) || 0),
        decided: decisions(after) - decisions(before),
        errors: Object.fromEntries(Object.entries(errAfter).map(([k, v]) => [k, v - errBefore[k]])),
      };
    } finally {
      agent.destroy();
      await envoy.stop();
    }
  }

  const show = (name: string, r: Run) => {
    const nonZero = Object.entries(r.envoy)
      .filter(([k, v]) => v !== 0 && !/bytes|_2xx|internal\.|membership|total_match/.test(k))
      .map(([k, v]) => `${k}=${r.afterFirst[k] ?? 0}+${v - (r.afterFirst[k] ?? 0)}`);
    console.log(
      `${name}: first burst ${JSON.stringify(r.first.statuses)}, second ${JSON.stringify(r.second.statuses)}, Redis ${r.counted}, ` +
        `sluice decided ${r.decided}, sluice errors ${JSON.stringify(r.errors)}; Envoy (first burst + second):\n  ${nonZero.join("\n  ")}`,
    );
  };

  /**
   * What holds in every run: each client got 200 or 429 as sluice or the failure mode (allow) said, sluice
   * counted exactly what it allowed, and every failed call is one Envoy itself failed (a circuit breaker) or a
   * stream refused by sluice's HTTP/2 layer; sluice reset, closed and failed nothing.
   */
  function expectAccounted(r: Run): void {
    const stat = (name: string) => {
      const v = r.envoy[name];
      if (v !== undefined) return v;
      if (name.startsWith("app.ratelimit.")) return 0; // the filter's stats appear with their first count
      throw new Error(`Envoy has no stat cluster.${name}`);
    };
    const ok = stat("app.ratelimit.ok");
    const over = stat("app.ratelimit.over_limit");
    const failed = stat("app.ratelimit.error");
    for (const b of [r.first, r.second]) expect(Object.keys(b.statuses).every((s) => s === "200" || s === "429")).toBe(true);
    const answered = (code: string) => (r.first.statuses[code] ?? 0) + (r.second.statuses[code] ?? 0);
    expect(answered("429")).toBe(over);
    expect(answered("200")).toBe(ok + failed);
    expect(stat("app.ratelimit.failure_mode_allowed")).toBe(failed);
    expect(r.decided).toBe(ok + over);
    expect(ok).toBe(Math.min(r.decided, LIMIT));
    expect(r.counted).toBe(ok);
    expect(r.errors).toEqual({ request_errors: 0, streams_reset: 0, connections_closed: 0 });
    expect(failed).toBe(stat("sluice.http2.rx_reset") + stat("sluice.upstream_rq_pending_overflow") + stat("sluice.upstream_rq_active_overflow"));
    expect(stat("sluice.upstream_cx_protocol_error")).toBe(0);
    expect(stat("sluice.upstream_rq_tx_reset")).toBe(0);
    expect(stat("sluice.upstream_rq_timeout")).toBe(0);
  }

  /** Nothing failed: the first burst passes whole, the second crosses the limit exactly. */
  function expectExact(r: Run): void {
    expectAccounted(r);
    expect(r.first.statuses).toEqual({ "200": CLIENTS });
    expect(r.second.statuses).toEqual({ "200": LIMIT - CLIENTS, "429": 2 * CLIENTS - LIMIT });
    expect(r.envoy["app.ratelimit.error"] ?? 0).toBe(0);
    expect(r.envoy["sluice.http2.rx_reset"]).toBe(0);
    expect(r.counted).toBe(LIMIT);
  }

  it("Envoy's default circuit breakers: past 1,024 calls in flight Envoy fails the rest at once (failure mode), sluice sees none of them", async () => {
    const r = await run(sluice, "defaults", undefined);
    show("default circuit breakers", r);
    expectAccounted(r);
    // 2,000 requests at once put more than max_requests (1,024) calls in flight: the excess never reaches sluice.
    expect(r.envoy["sluice.upstream_rq_active_overflow"]).toBeGreaterThan(0);
    expect(r.envoy["sluice.http2.rx_reset"]).toBe(0);
    expect(r.envoy["sluice.upstream_rq_pending_overflow"]).toBe(0);
  }, 120_000);

  it("raised circuit breakers (envoy/envoy.yaml's: max_requests 4,096) and Envoy's max_concurrent_streams at sluice's 1,000: every call answered, the counter exact", async () => {
    const r = await run(sluice, "raised", SHIPPED_BREAKERS, 1000);
    show("raised circuit breakers, max_concurrent_streams 1000", r);
    expectExact(r);
    // One connection per Envoy worker, a second where a worker's calls passed 1,000.
    expect(r.envoy["sluice.upstream_cx_total"]).toBeLessThanOrEqual(4);
  }, 120_000);

  it("sluice's stream limit (100) below what Envoy puts on a new connection before its SETTINGS arrive: refused streams, failed open", async () => {
    const r = await run(narrow, "narrow", SHIPPED_BREAKERS);
    show("sluice limit 100, Envoy's max_concurrent_streams unset", r);
    expectAccounted(r);
    expect(r.envoy["sluice.http2.rx_reset"]).toBeGreaterThan(0);
  }, 120_000);

  it("with Envoy's max_concurrent_streams at sluice's 100 no stream is refused, but calls waiting for new connections pass max_pending_requests (256)", async () => {
    // The overflow needs more than 256 calls waiting at once: a busy host can send the 2,000 too slowly for that,
    // so a run without it is run again (at most 3); every run holds the rest.
    const overflows: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      const r = await run(narrow, `narrow-pending-${attempt}`, SHIPPED_BREAKERS, 100);
      show("sluice limit 100, Envoy's max_concurrent_streams 100, max_pending_requests 256", r);
      expectAccounted(r);
      expect(r.envoy["sluice.http2.rx_reset"]).toBe(0);
      overflows.push(r.envoy["sluice.upstream_rq_pending_overflow"]);
      if (overflows.at(-1)! > 0) break;
    }
    expect(overflows.at(-1), `pending overflows per run: ${overflows.join(", ")}`).toBeGreaterThan(0);
  }, 300_000);

  it("and with max_pending_requests 4,096: Envoy opens more connections and queues, every call answered, the counter exact", async () => {
    const r = await run(narrow, "narrow-bounded", { ...SHIPPED_BREAKERS, max_pending_requests: 4096 }, 100);
    show("sluice limit 100, Envoy's max_concurrent_streams 100, max_pending_requests 4096", r);
    expectExact(r);
    expect(r.envoy["sluice.upstream_cx_total"]).toBeGreaterThan(2);
  }, 120_000);
});
