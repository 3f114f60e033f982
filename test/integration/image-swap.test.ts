// "One image swap": sluice started the way its Docker image runs it (`node dist/bin.js serve`, the image's
// NODE_ENV and NODE_OPTIONS, no flags) with nothing but envoyproxy/ratelimit's environment, on the
// reference's own integration runtime directory (test/fixtures/reference-runtime), answers the reference's
// integration sequence (its test/integration/integration_test.go) over real gRPC against a real
// redis-server, and serves the reference's HTTP surface (/healthcheck, POST /json, /rlconfig) and
// Prometheus metrics. The environment is docs/migrating.md "Replace envoyproxy/ratelimit"'s "after" Deployment:
// the reference's variables, unchanged, with ports free ones on this host.
//
// Cases of the reference not run here, and why:
// - the `WithPerSecondRedis` variants crossed with the local cache or stop-increment: WithPerSecondRedis
//   runs here; the crossings only repeat it with a second store;
// - TestBasicConfigMemcache, TestConfigMemcacheWithMaxIdleConns, TestMultiNodeMemcache: BACKEND_TYPE=memcache
//   is refused (no memcache store);
// - TestXdsProviderBasicConfig, TestXdsProviderBasicConfigReload: CONFIG_TYPE=GRPC_XDS_SOTW needs a control
//   plane; xds.test.ts runs sluice against one (first config, reloads, NACKs, restarts, TLS, Envoy Gateway's env);
// - Test_mTLS: it sets GRPC_CLIENT_TLS_SAN, which sluice refuses (it does not check client certificate names);
// - TestBasicTLSConfig (Redis behind the reference's stunnel with its certificates), TestReloadGRPCServerCerts,
//   TestBasicAuthConfigWithRedisCluster and ...WithRedisSentinel: the same sequence on TLS, Cluster and
//   Sentinel Redis needs those set-ups; REDIS_TLS* is run in redis-auth.test.ts, gRPC certificate reload in
//   tls.test.ts, Cluster in scale-out.test.ts, Sentinel in sentinel.test.ts, not through this sequence;
// - the reference's local-cache statsd gauges (ratelimit.localcache.hitCount/missCount) and its
//   over_limit_with_local_cache counts: sluice's deny note is not the reference's local cache, and what it
//   counts differs (docs/operating.md "The deny note"); the local-cache variant asserts the answers and hit counts.
// Where sluice answers otherwise on purpose (docs/rules.md "Where sluice differs from the reference"), the test
// asserts sluice's documented value and says so at the assertion.
//
// sluice bounds a store call by its own 50 ms store timeout under this environment too (REDIS_TIMEOUT is not
// taken), and a host whose cores are all taken can keep Redis waiting for a CPU longer than that: the call then
// fails (UNAVAILABLE, as the reference's do on a Redis error) and the sequence cannot be the reference's. Such a
// case is run again from an empty store (at most ATTEMPTS times in all), only where sluice counted failed store
// calls and the kernel shows the host kept a Redis of the case from a CPU for the store timeout (run-queue.ts);
// any other failure fails.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient, type WireResponse } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow, type SecondsClock } from "../helpers/minute.js";
import { freePort } from "../helpers/ports.js";
import { parseMetrics, sampleValue, type Sample } from "../helpers/prom.js";
import { scriptCalls, startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { runAgainWhereHostHeld } from "../helpers/run-queue.js";
import { MAIN, ROOT } from "../helpers/sluice.js";
import { track } from "../helpers/children.js";
import { until } from "../helpers/wait.js";

const FIXTURE = path.join(ROOT, "test/fixtures/reference-runtime");
const DOCKERFILE = fs.readFileSync(path.join(ROOT, "Dockerfile"), "utf8");
const SECOND = 1,
  MINUTE = 2,
  HOUR = 3,
  DAY = 4; // RateLimitResponse.RateLimit.Unit
/** sluice's store timeout under the reference's environment (SLUICE_STORE_TIMEOUT_MS's default). */
const STORE_TIMEOUT_MS = 50;
/** Runs of a case at most, where the host explains a failed one (see the top of the file). */
const ATTEMPTS = 3;
/** A start on a busy host can take seconds: how long to wait for the `listening` line. */
const START_MS = 60_000;

/** The image's ENV lines (NODE_ENV, NODE_OPTIONS): what every container of it starts with. */
function imageEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of DOCKERFILE.matchAll(/^ENV (\w+)=(\S+)$/gm)) out[m[1]] = m[2];
  return out;
}

/** The image's CMD: ["node", "dist/bin.js", "serve"]. */
function imageCmd(): string[] {
  const m = /^CMD (\[.*\])$/m.exec(DOCKERFILE);
  if (!m) throw new Error("Dockerfile has no exec-form CMD");
  return JSON.parse(m[1]);
}

/** A fresh copy of the reference's runtime directory: the reload step writes into its config/. */
function runtimeCopy(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-refruntime-"));
  fs.cpSync(path.join(FIXTURE, "current"), path.join(dir, "current"), { recursive: true });
  return path.join(dir, "current");
}

interface Ports {
  grpc: number;
  http: number;
  debug: number;
  prometheus: number;
  /** sluice's admin port (127.0.0.1:8082 under the reference's environment): moved to a free one here. */
  admin: number;
}

interface Swapped {
  ports: Ports;
  client: RlsClient;
  logs: string[];
  stop(): Promise<number | null>;
}

const freePorts = async (): Promise<Ports> => ({
  grpc: await freePort(),
  http: await freePort(),
  debug: await freePort(),
  prometheus: await freePort(),
  admin: await freePort(),
});

/** A Deployment's env list (docs/migrating.md "Replace envoyproxy/ratelimit"): name -> value, or the secret it names. */
type DeploymentEnv = Record<string, string | { secret: string }>;

/** The "before" (the reference) and "after" (sluice) Deployments of docs/migrating.md "Replace envoyproxy/ratelimit". */
function readmeDeployments(): { before: DeploymentEnv; after: DeploymentEnv; containers: Record<string, any>[] } {
  const page = fs.readFileSync(path.join(ROOT, "docs/migrating.md"), "utf8");
  const section = page.split(/^## Replace envoyproxy\/ratelimit$/m)[1]?.split(/^## /m)[0];
  if (!section) throw new Error('docs/migrating.md has no "Replace envoyproxy/ratelimit" section');
  const blocks = [...section.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map((m) => parseYaml(m[1]).containers[0]);
  expect(blocks.length).toBe(2);
  const env = (c: { env: { name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string } } }[] }) =>
    Object.fromEntries(
      c.env.map((e) => [e.name, e.valueFrom ? { secret: `${e.valueFrom.secretKeyRef.name}/${e.valueFrom.secretKeyRef.key}` } : String(e.value)]),
    );
  return { before: env(blocks[0]), after: env(blocks[1]), containers: blocks };
}

/**
 * The reference's integration settings (its defaultSettings + makeSimpleRedisSettings, WithoutPerSecondRedis)
 * as environment variables, ports free ones, listeners on 127.0.0.1. Of sluice's own only SLUICE_ADMIN_PORT, a
 * free port too (its admin port has no reference variable).
 */
function integrationEnv(root: string, redisPort: number, ports: Ports): Record<string, string> {
  return {
    RUNTIME_ROOT: root,
    RUNTIME_SUBDIRECTORY: "ratelimit",
    RUNTIME_APPDIRECTORY: "config",
    RUNTIME_WATCH_ROOT: "true",
    RUNTIME_IGNOREDOTFILES: "false",
    REDIS_SOCKET_TYPE: "tcp",
    REDIS_PERSECOND_SOCKET_TYPE: "tcp",
    REDIS_URL: `127.0.0.1:${redisPort}`,
    REDIS_PERSECOND: "false",
    BACKEND_TYPE: "redis",
    LOCAL_CACHE_SIZE_IN_BYTES: "0",
    USE_STATSD: "false",
    GRPC_HOST: "127.0.0.1",
    GRPC_PORT: String(ports.grpc),
    HOST: "127.0.0.1",
    PORT: String(ports.http),
    DEBUG_HOST: "127.0.0.1",
    DEBUG_PORT: String(ports.debug),
    // A reference-style environment: Prometheus instead of StatsD, debug logs.
    USE_PROMETHEUS: "true",
    PROMETHEUS_ADDR: `127.0.0.1:${ports.prometheus}`,
    LOG_LEVEL: "debug",
    SLUICE_ADMIN_PORT: String(ports.admin),
  };
}

/**
 * Runs the image's command (`node dist/bin.js serve`, from the Dockerfile) with the image's ENV and, beyond
 * PATH, nothing but `env`; resolves once it logs `listening` on the ports asked for.
 */
async function launch(env: Record<string, string>, ports: Ports): Promise<Swapped> {
  const [cmd, ...args] = imageCmd();
  expect([cmd, ...args]).toEqual(["node", "dist/bin.js", "serve"]);
  expect(path.join(ROOT, args[0])).toBe(MAIN);
  // The image's `node` is Node 24, as is the one running these tests.
  const proc = track(
    spawn(process.execPath, args, {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...imageEnv(), ...env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  const logs: string[] = [];
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  const line = await listening(proc, logs);
  const client = rlsClient(ports.grpc);
  const swapped: Swapped = {
    ports,
    client,
    logs,
    async stop() {
      client.close();
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      return exited;
    },
  };
  running.push(swapped);
  // The reference's ports, and sluice's admin port on loopback (the image opens it no wider).
  expect([line.port, line.httpPort, line.debugPort, line.prometheusPort, line.adminPort, line.adminHost]).toEqual([
    ports.grpc,
    ports.http,
    ports.debug,
    ports.prometheus,
    ports.admin,
    "127.0.0.1",
  ]);
  return swapped;
}

/** Resolves with the `listening` log line; rejects with the output if the process exits or stays silent. */
function listening(proc: ChildProcess, logs: string[]): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`sluice did not start:\n${logs.join("\n")}`));
    }, START_MS);
    let buf = "";
    proc.stdout!.on("data", (chunk: Buffer) => {
      buf += chunk.toString();
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        logs.push(line);
        try {
          const j = JSON.parse(line);
          if (j.msg === "listening") {
            clearTimeout(timer);
            resolve(j);
          }
        } catch {
          /* not JSON */
        }
      }
    });
    proc.stderr!.on("data", (chunk: Buffer) => logs.push(chunk.toString()));
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`sluice exited with ${code} before listening:\n${logs.join("\n")}`));
    });
  });
}

async function http(port: number, urlPath: string, init: RequestInit = {}): Promise<{ status: number; type: string | null; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${urlPath}`, init);
  return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
}

async function metrics(s: Swapped): Promise<Sample[]> {
  const res = await http(s.ports.prometheus, "/metrics");
  expect(res.status).toBe(200);
  return parseMetrics(res.body);
}

/** The reference's common.NewRateLimitRequest: one descriptor per entry list, hits_addend 1. */
function request(domain: string, ...descriptors: [string, string][][]) {
  return { domain, descriptors: descriptors.map((entries) => descriptor(entries)), hits_addend: 1 };
}

/** The reference's newDescriptorStatus: code, the limit, remaining; duration_until_reset is checked apart. */
function status(code: number, requestsPerUnit: number, unit: number, remaining: number) {
  return proto3({ code, current_limit: { requests_per_unit: requestsPerUnit, unit }, limit_remaining: remaining });
}

/**
 * A message with its proto3 scalar fields at their default (0, "", false, empty lists) left out: what the
 * reference's proto.Equal compares (an explicit 0 on the wire and an absent field are the same message).
 * Sub-messages stay, present or absent, as proto.Equal tells them apart.
 */
function proto3(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(proto3);
  if (value === null || typeof value !== "object" || Buffer.isBuffer(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined || v === 0 || v === "" || v === false || (Array.isArray(v) && v.length === 0)) continue;
    if (Buffer.isBuffer(v) && v.length === 0) continue;
    out[k] = proto3(v);
  }
  return out;
}

/** The response (proto3-normalised) without each status's duration_until_reset, which is returned for separate checks. */
function split(res: WireResponse): { answer: unknown; resets: number[] } {
  const resets = res.statuses.map((s) => Number(s.duration_until_reset?.seconds ?? 0));
  const statuses = res.statuses.map(({ duration_until_reset: _d, ...rest }) => rest);
  return { answer: proto3({ overall_code: res.overall_code, statuses }), resets };
}

/** What the reference asserts for a descriptor no rule matches, or a domain no file defines: a bare OK status each. */
const bareOk = (n = 1) => ({ answer: { overall_code: OK, statuses: Array.from({ length: n }, () => ({ code: OK })) }, resets: Array(n).fill(0) });

const unique = () => `${Date.now()}-${Math.floor(Math.random() * 1e9)}`;

let redis: RedisProcess;
const running: Swapped[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});
afterAll(async () => {
  await redis?.stop();
});

/** Store calls that failed (a timeout among them), summed over the store's nodes. */
async function storeFailures(s: Swapped): Promise<number> {
  return (await metrics(s)).filter((x) => x.name === "sluice_store_errors_total").reduce((n, x) => n + x.value, 0);
}

/**
 * Runs a case (each run starts from an empty store: `run` empties any Redis it uses but the shared one, which
 * swapped() empties). A failed run is run again only where a store call of its sluice failed (under this
 * environment a late one fails the request, as the reference's Redis errors do) and the host kept one of
 * `redises` waiting for a CPU for the store timeout; ATTEMPTS runs at most.
 */
async function onHostThatLetsRedisRun(redises: RedisProcess[], run: () => Promise<void>): Promise<void> {
  const first = running.length;
  await runAgainWhereHostHeld(
    {
      pids: redises.map((r) => r.proc.pid!),
      timeoutMs: STORE_TIMEOUT_MS,
      attempts: ATTEMPTS,
      // The run's own sluices (none yet before it).
      storeFailures: async () => {
        let n = 0;
        for (const s of running.slice(first)) n += await storeFailures(s).catch(() => 0);
        return n;
      },
      beforeAgain: async () => {
        await Promise.all(running.splice(first).map((x) => x.stop()));
      },
    },
    run,
  );
}

/** The reference's integration settings, changed by `extra`, on the shared test Redis emptied first. */
async function swapped(root: string, extra: Record<string, string> = {}): Promise<Swapped> {
  // Each case starts from an empty store (as each of the reference's runs on its own Redis state) and zeroed command stats.
  await redis.cli("FLUSHALL");
  await redis.cli("CONFIG", "RESETSTAT");
  const ports = await freePorts();
  return launch({ ...integrationEnv(root, redis.port, ports), ...extra }, ports);
}

/**
 * The reference's testBasicBaseConfig, request for request. `local` appends `_local` to the keys as the
 * reference does when LOCAL_CACHE_SIZE_IN_BYTES > 0 (its runtime files have both spellings).
 */
async function basicSequence(s: Swapped, local: boolean, clock: SecondsClock = redisClock(redis), stopIncrement = false): Promise<void> {
  const k = (key: string) => (local ? `${key}_local` : key);
  const c = s.client;

  // A domain no file defines: OK, one bare OK status per descriptor.
  expect(split(await c.shouldRateLimit(request("foo", [[k("hello"), "world"]])))).toEqual(bareOk());

  // basic: 50 per second; the first hit leaves 49, resetting within the second (the reference reads it back).
  const first = split(await c.shouldRateLimit(request("basic", [[k("key1"), "foo"]])));
  expect(first.answer).toEqual({ overall_code: OK, statuses: [status(OK, 50, SECOND, 49)] });
  expect(first.resets[0]).toBeGreaterThanOrEqual(0);
  expect(first.resets[0]).toBeLessThanOrEqual(1);

  // another: 20 per minute on key2, 25 hits. The reference lets a minute boundary fall inside; here the
  // 40 minute-window hits (this loop and the next) start with room in the minute.
  await roomInWindow(60, 20, clock);
  const v1 = unique();
  for (let i = 0; i < 25; i++) {
    const res = split(await c.shouldRateLimit(request("another", [[k("key2"), v1]])));
    const code = i >= 20 ? OVER_LIMIT : OK;
    // Reference: remaining 20-(i+1), 0 once over; the same here.
    expect(res.answer, `hit ${i}`).toEqual({ overall_code: code, statuses: [status(code, 20, MINUTE, i >= 20 ? 0 : 20 - (i + 1))] });
    expect(res.resets[0]).toBeGreaterThan(0);
    expect(res.resets[0]).toBeLessThanOrEqual(60);
  }

  // Two descriptors: key2 (20/minute) and key3 (10/hour), 15 hits; from the 11th key3 refuses.
  const v2 = unique();
  for (let i = 0; i < 15; i++) {
    const res = split(await c.shouldRateLimit(request("another", [[k("key2"), v2]], [[k("key3"), v2]])));
    const over = i >= 10;
    // Reference (default settings): key2 keeps counting while key3 refuses, remaining 20-(i+1); with
    // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true it stays at 10. sluice does the same in the reference's
    // keys (on under its environment); in its own keys it always does the latter.
    const remaining1 = over && stopIncrement ? 10 : 20 - (i + 1);
    expect(res.answer, `hit ${i}`).toEqual({
      overall_code: over ? OVER_LIMIT : OK,
      statuses: [status(OK, 20, MINUTE, remaining1), status(over ? OVER_LIMIT : OK, 10, HOUR, over ? 0 : 10 - (i + 1))],
    });
  }

  // duration_until_reset counts down: the same key4 (20/day) twice, Redis's clock a whole second apart.
  // (The reference sleeps 2 s; here the wait is on Redis TIME, the clock that decides.)
  await roomInWindow(86_400, 10, clock);
  const r1 = await c.shouldRateLimit(request("another", [[k("key4"), "durTest"]]));
  const t1 = Math.floor(await clock());
  await until(
    async () => Math.floor(await clock()) >= t1 + 2,
    10_000,
    () => "Redis's clock to pass two seconds",
    50,
  );
  const r2 = await c.shouldRateLimit(request("another", [[k("key4"), "durTest"]]));
  expect(Number(r2.statuses[0].duration_until_reset?.seconds)).toBeLessThan(Number(r1.statuses[0].duration_until_reset?.seconds));
  expect(split(r2).answer).toEqual({ overall_code: OK, statuses: [status(OK, 20, DAY, 18)] });
}

/** The reference's per-key stats after basicSequence, in sluice's names (docs/operating.md "Metrics"). */
function expectSequenceCounters(samples: Sample[], local: boolean, labels: Record<string, string> = {}): void {
  const k = (key: string) => (local ? `${key}_local` : key);
  const rule = (domain: string, key: string) => ({ ...labels, domain, rule: `${domain}.${k(key)}`, limit: "rate_limit" });
  const hits = (d: string, key: string) => sampleValue(samples, "sluice_rule_hits_total", rule(d, key));
  const over = (d: string, key: string) => sampleValue(samples, "sluice_rule_over_limit_total", rule(d, key));
  // Reference: basic.key1 total_hits 1; another.key2 total_hits 25 + 15 = 40, over_limit 5;
  // another.key3 total_hits 15, over_limit 5. sluice counts every hit checked against a limit the same way.
  expect([hits("basic", "key1"), over("basic", "key1")]).toEqual([1, 0]);
  expect([hits("another", "key2"), over("another", "key2")]).toEqual([40, 5]);
  expect([hits("another", "key3"), over("another", "key3")]).toEqual([15, 5]);
  expect([hits("another", "key4"), over("another", "key4")]).toEqual([2, 0]);
  // No answer came from a failure policy (the store answered every call).
  expect(samples.filter((x) => x.name === "sluice_rule_failure_policy_decisions_total" && x.value > 0)).toEqual([]);
}

const PASSWORD = "password123"; // the reference's integration Redis password

describe('docs/migrating.md "Replace envoyproxy/ratelimit": the before and after Deployments', () => {
  it("after = before unchanged, but the image and its command", () => {
    const { before, after, containers } = readmeDeployments();
    expect(after).toEqual(before);
    // The rest of the container: the same ports, probe and mount; no command (the image's CMD, which launch() runs).
    const [ref, sluice] = containers;
    expect([sluice.ports, sluice.livenessProbe, sluice.volumeMounts]).toEqual([ref.ports, ref.livenessProbe, ref.volumeMounts]);
    expect(ref.command).toEqual(["/bin/ratelimit"]);
    expect(sluice.command).toBeUndefined();
  });

  it("the after Deployment's env starts the image (TestBasicAuthConfig's sequence, REDIS_AUTH) and serves the reference's HTTP surface", async () => {
    const { after } = readmeDeployments();
    const root = runtimeCopy();
    const authed = await startRedis();
    await authed.cli("CONFIG", "SET", "requirepass", PASSWORD);
    const authedCli = (...a: string[]) => authed.cli("--no-auth-warning", "-a", PASSWORD, ...a);
    const clock = redisClock({ cli: authedCli });
    try {
      await onHostThatLetsRedisRun([authed], async () => {
        await authedCli("FLUSHALL");
        const ports = await freePorts();
        // What this host changes in the Deployment: where Redis and the rule files are, and ports that are free
        // here (the Deployment leaves the ports at the defaults 8081, 8080, 6070 and :9090). Everything else
        // is the value docs/migrating.md shows, unchanged.
        const local: Record<string, string> = {
          REDIS_URL: `127.0.0.1:${authed.port}`,
          REDIS_AUTH: PASSWORD,
          RUNTIME_ROOT: root, // holds ratelimit/config/*.yaml, as /data does in the Deployment
          PORT: String(ports.http),
          DEBUG_PORT: String(ports.debug),
          GRPC_PORT: String(ports.grpc),
          PROMETHEUS_ADDR: `127.0.0.1:${ports.prometheus}`,
          SLUICE_ADMIN_PORT: String(ports.admin),
        };
        expect(after.REDIS_AUTH).toEqual({ secret: "redis/password" });
        const env = Object.fromEntries(Object.entries(after).filter((e): e is [string, string] => typeof e[1] === "string"));
        const s = await launch({ ...env, ...local }, ports);
        expect(Object.keys(local).filter((k) => !(k in after))).toEqual(["PORT", "DEBUG_PORT", "GRPC_PORT", "PROMETHEUS_ADDR", "SLUICE_ADMIN_PORT"]);

        // The start log: the variables sluice accepts and does not use are listed (none refused: it started).
        const notes = s.logs
          .map((l) => JSON.parse(l))
          .filter((l) => l.variable !== undefined)
          .map((l) => l.variable);
        expect(notes).toContain("RUNTIME_WATCH_ROOT");
        expect(s.logs.join("\n")).not.toContain(PASSWORD);

        await basicSequence(s, false, clock);
        expectSequenceCounters(await metrics(s), false);

        // GET /healthcheck on PORT: healthy (Redis was reached); sluice's own routes on its admin port, not there.
        expect(await http(s.ports.http, "/healthcheck")).toEqual({ status: 200, type: "text/plain; charset=utf-8", body: "OK" });
        expect((await http(s.ports.http, "/readyz")).status).toBe(404);
        expect((await http(s.ports.admin, "/readyz")).status).toBe(200);

        // POST /json on PORT: a request of the sequence (another, key3: 10 per hour) in protobuf JSON, 11 times.
        const v = unique();
        const json = { domain: "another", descriptors: [{ entries: [{ key: "key3", value: v }] }], hitsAddend: 1 };
        const answers = [];
        for (let i = 0; i < 11; i++) answers.push(await http(s.ports.http, "/json", { method: "POST", body: JSON.stringify(json) }));
        const parse = (a: { status: number; type: string | null; body: string }) => {
          const j = JSON.parse(a.body);
          expect(j.statuses[0].durationUntilReset).toMatch(/^\d+s$/);
          delete j.statuses[0].durationUntilReset;
          return { status: a.status, type: a.type, json: j };
        };
        const limit = { requestsPerUnit: 10, unit: "HOUR" };
        expect(parse(answers[0])).toEqual({
          status: 200,
          type: "application/json",
          json: { overallCode: "OK", statuses: [{ code: "OK", currentLimit: limit, limitRemaining: 9 }] },
        });
        // The 11th: 429 with OVER_LIMIT, remaining 0 (left out: protobuf JSON omits a field at its default).
        const last = parse(answers[10]);
        expect({ status: last.status, type: last.type, overallCode: last.json.overallCode, statuses: last.json.statuses }).toEqual({
          status: 429,
          type: "application/json",
          overallCode: "OVER_LIMIT",
          statuses: [{ code: "OVER_LIMIT", currentLimit: limit }],
        });
        // ...and gRPC sees the same counter: refused, as the 12th hit.
        const again = split(await s.client.shouldRateLimit(request("another", [["key3", v]])));
        expect(again.answer).toEqual({ overall_code: OVER_LIMIT, statuses: [status(OVER_LIMIT, 10, HOUR, 0)] });

        // GET /rlconfig on DEBUG_PORT: one line per limit of the reference's three files.
        const rl = await http(s.ports.debug, "/rlconfig");
        expect(rl.status).toBe(200);
        const line = (path: string, unit: string, rpu: number) => `${path}: unit=${unit} requests_per_unit=${rpu}, shadow_mode: false, quota_mode: false`;
        expect(rl.body.split("\n").filter(Boolean).sort()).toEqual(
          [
            line("another.key2", "MINUTE", 20),
            line("another.key3", "HOUR", 10),
            line("another.key2_local", "MINUTE", 20),
            line("another.key3_local", "HOUR", 10),
            line("another.key4", "DAY", 20),
            line("another.key4_local", "DAY", 20),
            line("basic.key1", "SECOND", 50),
            line("basic.key1_local", "SECOND", 50),
            line("basic.one_per_minute", "MINUTE", 1),
            line("share-threshold-test.files_files/*", "HOUR", 10),
            line("share-threshold-test.files_no_share_files_no_share/*", "HOUR", 10),
          ].sort(),
        );

        // PROMETHEUS_ADDR + PROMETHEUS_PATH: the reference's per-key stats under sluice's names.
        const samples = await metrics(s);
        const key3 = { domain: "another", rule: "another.key3", limit: "rate_limit" };
        // key3: 15 hits of the sequence (5 refused), then 11 via /json (1 refused) and 1 via gRPC (refused).
        expect(sampleValue(samples, "sluice_rule_hits_total", key3)).toBe(27);
        expect(sampleValue(samples, "sluice_rule_over_limit_total", key3)).toBe(7);
        expect(sampleValue(samples, "sluice_config_loads_total", { result: "success" })).toBe(1);
        expect(sampleValue(samples, "sluice_rule_hits_total", { domain: "basic", rule: "basic.key1", limit: "rate_limit" })).toBe(1);
        expect(sampleValue(samples, "sluice_rule_hits_total", { domain: "another", rule: "another.key2", limit: "rate_limit" })).toBe(40);

        expect(await s.stop()).toBe(0);
      });
    } finally {
      await Promise.all(running.splice(0).map((x) => x.stop()));
      await authed.stop();
    }
  });
});

describe("the reference's integration settings and runtime directory, unchanged", () => {
  it("TestBasicConfig/WithoutPerSecondRedis: the sequence", async () => {
    await onHostThatLetsRedisRun([redis], async () => {
      const s = await swapped(runtimeCopy());
      await basicSequence(s, false);
      expectSequenceCounters(await metrics(s), false);
    });
  });

  it("TestBasicConfig/WithPerSecondRedis: REDIS_PERSECOND=true, per-second limits counted in the second Redis", async () => {
    const perSecond = await startRedis();
    try {
      await onHostThatLetsRedisRun([redis, perSecond], async () => {
        await perSecond.cli("FLUSHALL");
        await perSecond.cli("CONFIG", "RESETSTAT");
        const s = await swapped(runtimeCopy(), {
          REDIS_PERSECOND: "true",
          REDIS_PERSECOND_URL: `127.0.0.1:${perSecond.port}`,
          SLUICE_TOP: "off", // script calls are counted below: no refusal summaries (sluice's own, docs/top.md)
        });
        await basicSequence(s, false);
        expectSequenceCounters(await metrics(s), false);
        // basic.key1 (per second) is the one limit of the sequence counted in the per-second Redis: one script
        // call there; the other 42 requests with a limit (key2 x 25, key2 + key3 x 15, key4 x 2) in the main one.
        // And on each, the permission check's EVAL at connect (store/acl-check.ts).
        expect([await scriptCalls(perSecond), await scriptCalls(redis)]).toEqual([1 + 1, 42 + 1]);
      });
    } finally {
      await Promise.all(running.splice(0).map((x) => x.stop()));
      await perSecond.stop();
    }
  });

  it("TestBasicConfig/WithoutPerSecondRedisWithLocalCache: LOCAL_CACHE_SIZE_IN_BYTES=1000, the _local keys, the same answers", async () => {
    await onHostThatLetsRedisRun([redis], async () => {
      const s = await swapped(runtimeCopy(), { LOCAL_CACHE_SIZE_IN_BYTES: "1000" });
      await basicSequence(s, true);
      expectSequenceCounters(await metrics(s), true);
    });
  });

  it("TestBasicConfig/WithoutPerSecondRedisWithCachePrefix: CACHE_KEY_PREFIX=prefix: puts every key under the prefix", async () => {
    await onHostThatLetsRedisRun([redis], async () => {
      const s = await swapped(runtimeCopy(), { CACHE_KEY_PREFIX: "prefix:" });
      await basicSequence(s, false);
      expectSequenceCounters(await metrics(s), false);
      const keys = (await redis.cli("--scan")).split("\n").filter(Boolean);
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.filter((key) => !key.startsWith("prefix:"))).toEqual([]);
    });
  });

  it("TestBasicConfig/...WithstopCacheKeyIncrementWhenOverlimitConfig: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true, the same answers", async () => {
    await onHostThatLetsRedisRun([redis], async () => {
      const s = await swapped(runtimeCopy(), { STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: "true" });
      await basicSequence(s, false, redisClock(redis), true);
      expectSequenceCounters(await metrics(s), false);
    });
  });

  it("TestBasicReloadConfig/BasicWithoutWatchRoot: RUNTIME_WATCH_ROOT=false, the same sequence", async () => {
    await onHostThatLetsRedisRun([redis], async () => {
      const s = await swapped(runtimeCopy(), { RUNTIME_WATCH_ROOT: "false" });
      await basicSequence(s, false);
      expectSequenceCounters(await metrics(s), false);
    });
  });

  it("TestBasicReloadConfig/ReloadWithoutWatchRoot: a file copied into config/ loads, its removal loads again", async () => {
    await onHostThatLetsRedisRun([redis], async () => {
      const root = runtimeCopy();
      const s = await swapped(root, { RUNTIME_WATCH_ROOT: "false" });
      const loads = async () => sampleValue(await metrics(s), "sluice_config_loads_total", { result: "success" }) ?? 0;
      const reloadedAfter = async (before: number) => {
        let now = before;
        await until(
          async () => (now = await loads()) > before,
          30_000,
          () => `a rule reload:\n${s.logs.join("\n")}`,
          50,
        );
        return now;
      };

      // Domain "reload" is not loaded yet: a bare OK.
      expect(split(await s.client.shouldRateLimit(request("reload", [["block", "foo"]])))).toEqual(bareOk());
      const before = await loads();
      expect(before).toBe(1);

      fs.copyFileSync(path.join(root, "ratelimit/reload.yaml"), path.join(root, "ratelimit/config/reload.yaml"));
      const after = await reloadedAfter(before);
      const res = split(await s.client.shouldRateLimit(request("reload", [["key1", "foo"]])));
      expect(res.answer).toEqual({ overall_code: OK, statuses: [status(OK, 50, SECOND, 49)] });
      // block: requests_per_unit 0, now loaded: refused (the reference's test does not ask it after the reload).
      const blocked = split(await s.client.shouldRateLimit(request("reload", [["block", "foo"]])));
      expect(blocked.answer).toEqual({ overall_code: OVER_LIMIT, statuses: [status(OVER_LIMIT, 0, SECOND, 0)] });

      // Removing the file must trigger a reload too.
      fs.rmSync(path.join(root, "ratelimit/config/reload.yaml"));
      await reloadedAfter(after);
      expect(split(await s.client.shouldRateLimit(request("reload", [["key1", "foo"]])))).toEqual(bareOk());
    });
  });

  it("TestBasicConfig_ExtraTags: EXTRA_TAGS become labels on the per-rule and config-load counters", async () => {
    const s = await swapped(runtimeCopy(), { EXTRA_TAGS: "foo:bar,a:b" });
    await s.client.shouldRateLimit(request("basic", [["key1", "foo"]]));
    const samples = await metrics(s);
    const tags = { foo: "bar", a: "b" };
    // Reference: ratelimit.service.rate_limit.basic.key1.total_hits{foo,a} = 1, config_load_success{foo,a} = 1.
    expect(sampleValue(samples, "sluice_rule_hits_total", { ...tags, domain: "basic", rule: "basic.key1", limit: "rate_limit" })).toBe(1);
    expect(sampleValue(samples, "sluice_config_loads_total", { ...tags, result: "success" })).toBe(1);
  });

  it("TestShareThreshold: files/* shares one counter across values; files_no_share/* counts each value alone", async () => {
    await onHostThatLetsRedisRun([redis], async () => {
      const s = await swapped(runtimeCopy());
      await roomInWindow(3600, 30, redisClock(redis));
      const domain = "share-threshold-test";
      // The reference accepts OK or OVER_LIMIT for these 10; from an empty store they are exactly 10 OKs.
      const codes = [];
      for (let i = 0; i < 10; i++) codes.push((await s.client.shouldRateLimit(request(domain, [["files", "files/a.pdf"]]))).overall_code);
      expect(codes).toEqual(Array(10).fill(OK));
      const shared = split(await s.client.shouldRateLimit(request(domain, [["files", "files/b.csv"]])));
      expect(shared.answer).toEqual({ overall_code: OVER_LIMIT, statuses: [status(OVER_LIMIT, 10, HOUR, 0)] });

      const base = unique();
      for (let i = 0; i < 10; i++) {
        const res = split(await s.client.shouldRateLimit(request(domain, [["files_no_share", `files_no_share/${base}-${i}`]])));
        expect(res.answer, `value ${i}`).toEqual({ overall_code: OK, statuses: [status(OK, 10, HOUR, 9)] });
      }
    });
  });
});
