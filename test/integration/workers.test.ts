// `sluice serve --workers N`: N processes on one port, each answering calls; connections spread over
// them (the kernel with SO_REUSEPORT where the transport can bind so, else the primary hands them out);
// the primary refuses a taken port, restarts a worker that dies and exits 0 on SIGTERM once every
// worker stopped cleanly. Where a connection went is read from /proc: which process holds its socket.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOADER_OPTIONS } from "../helpers/grpc-client.js";
import { closeSession, connected, h2Call, h2Session } from "../helpers/h2-call.js";
import { parseMetrics, sampleValue, scrape, type Sample } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ROOT, ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { listeningPids, serverEndHolder } from "../helpers/sockets.js";
import { until } from "../helpers/wait.js";
import { grpcFrame } from "../../bench/lib/frame.mjs";
import { track } from "../helpers/children.js";
import { rlqsClient, usage } from "../helpers/rlqs-client.js";

const RULES = `
domain: w
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: shared
    rate_limit: {unit: hour, requests_per_unit: 2}
`;

const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(["envoy/service/ratelimit/v3/rls.proto"], LOADER_OPTIONS)) as any;

/** One call on a connection of its own (a local subchannel pool: clients never share a connection). */
async function callOnNewConnection(port: number, key: string, value: string): Promise<number> {
  const client = new pkg.envoy.service.ratelimit.v3.RateLimitService(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
  });
  try {
    return await new Promise<number>((resolve, reject) =>
      client.ShouldRateLimit(
        { domain: "w", descriptors: [{ entries: [{ key, value }] }] },
        { deadline: Date.now() + 10_000 },
        (err: Error | null, res: { overall_code: number }) => (err ? reject(err) : resolve(res.overall_code)),
      ),
    );
  } finally {
    client.close();
  }
}

/** n calls in a row on one connection of its own; the overall codes. */
async function callsOnOneConnection(port: number, key: string, value: string, n: number): Promise<number[]> {
  const client = new pkg.envoy.service.ratelimit.v3.RateLimitService(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
  });
  try {
    const codes: number[] = [];
    for (let i = 0; i < n; i++) {
      codes.push(
        await new Promise<number>((resolve, reject) =>
          client.ShouldRateLimit(
            { domain: "w", descriptors: [{ entries: [{ key, value }] }] },
            { deadline: Date.now() + 10_000 },
            (err: Error | null, res: { overall_code: number }) => (err ? reject(err) : resolve(res.overall_code)),
          ),
        ),
      );
    }
    return codes;
  } finally {
    client.close();
  }
}

const method = pkg.envoy.service.ratelimit.v3.RateLimitService.service.ShouldRateLimit;

/** One call on an HTTP/2 connection of its own, and which of `workers` holds the server's end of it. */
async function callOwned(port: number, workers: number[], key: string, value: string): Promise<{ code: number; pid?: number }> {
  const session = h2Session(port);
  try {
    await connected(session);
    const a = await h2Call(session, { body: grpcFrame(method.requestSerialize({ domain: "w", descriptors: [{ entries: [{ key, value }] }] })) }).closed;
    if (a.error !== undefined || a.timedOut) throw new Error(`call failed: ${a.error ?? "timed out"}`);
    const pid = serverEndHolder(port, session.socket.localPort!, workers);
    return { code: method.responseDeserialize(a.data.subarray(5)).overall_code, pid };
  } finally {
    await closeSession(session);
  }
}

function childPids(pid: number): number[] {
  return fs
    .readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number)
    .sort((a, b) => a - b);
}

const byPid = (calls: { code: number; pid?: number }[]) => {
  const m = new Map<number, number[]>();
  for (const c of calls) m.set(c.pid ?? -1, [...(m.get(c.pid ?? -1) ?? []), c.code]);
  return m;
};

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const workerLines = (s: SluiceProcess) =>
  s.logs.flatMap((l) => {
    try {
      const j = JSON.parse(l);
      return j.msg === "worker listening" ? [j] : [];
    } catch {
      return [];
    }
  });

let redis: RedisProcess;
let sluice: SluiceProcess;

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await sluice?.stop();
  await redis?.stop();
});

describe("--workers 2", () => {
  it("logs one listening line with the real port after both workers listen", async () => {
    sluice = await startSluice(["--config", ruleDir({ "w.yaml": RULES }), "--workers", "2"]);
    const lines = sluice.logs.map((l) => JSON.parse(l));
    const listening = lines.filter((l) => l.msg === "listening");
    expect(listening.length).toBe(1);
    expect(listening[0].workers).toBe(2);
    expect(listening[0].port).toBe(sluice.port);
    // Three processes write to one pipe: a worker's own line may arrive after the primary's.
    await until(() => workerLines(sluice).length === 2, 10_000, "both 'worker listening' lines");
    expect(workerLines(sluice).map((l) => l.port)).toEqual([sluice.port, sluice.port]);
    expect(childPids(sluice.proc.pid!).length).toBe(2);
  });

  it("the listening line says who spreads connections, and the listening sockets agree", () => {
    const primary = sluice.proc.pid!;
    const workers = childPids(primary);
    const line = sluice.logs.map((l) => JSON.parse(l)).find((l) => l.msg === "listening");
    // SO_REUSEPORT: every worker listens itself. Otherwise the primary alone listens and hands connections out.
    expect(listeningPids(sluice.port, [primary, ...workers])).toEqual(line.balance === "reuseport" ? workers : [primary]);
    expect(["reuseport", "primary"]).toContain(line.balance);
  });

  it("connections spread over both workers, each answering from its own memory-store counter", async () => {
    const workers = childPids(sluice.proc.pid!);
    // 32 connections at once: with the kernel's hash, all on one worker has odds of 2^-31.
    const calls = await Promise.all(Array.from({ length: 32 }, () => callOwned(sluice.port, workers, "user", "ann")));
    const answers = byPid(calls);
    expect([...answers.keys()].sort((a, b) => a - b)).toEqual(workers);
    // Limit 1 per process: each worker let exactly one call through, its first.
    for (const codes of answers.values()) expect([...codes].sort()).toEqual([1, ...Array(codes.length - 1).fill(2)]);
  });

  it("restarts a worker that dies, on the same port", async () => {
    const [victim] = childPids(sluice.proc.pid!);
    process.kill(victim, "SIGKILL");
    await until(() => workerLines(sluice).length === 3, 10_000, "a third 'worker listening' line");
    expect(workerLines(sluice)[2].port).toBe(sluice.port);
    expect(childPids(sluice.proc.pid!).length).toBe(2);
    expect(await callOnNewConnection(sluice.port, "user", "restart")).toBe(1);
  });

  it("SIGTERM stops every worker and exits 0", async () => {
    const workers = childPids(sluice.proc.pid!);
    expect(await sluice.stop()).toBe(0);
    expect(workers.filter(alive)).toEqual([]);
  });
});

describe("--workers with Redis", () => {
  it("workers share the counters: a limit of 2 holds across 4 connections", async () => {
    const s = await startSluice(["--config", ruleDir({ "w.yaml": RULES }), "--redis", redis.url], { SLUICE_WORKERS: "2" });
    try {
      const codes: number[] = [];
      for (let i = 0; i < 4; i++) codes.push(await callOnNewConnection(s.port, "shared", "team"));
      expect(codes).toEqual([1, 1, 2, 2]);
    } finally {
      expect(await s.stop()).toBe(0);
    }
  });

  it("a taken port stops the primary before any worker starts", async () => {
    const holder = net.createServer();
    await new Promise<void>((r) => holder.listen(0, "127.0.0.1", r));
    const port = (holder.address() as net.AddressInfo).port;
    try {
      const r = runCli([
        "serve",
        "--workers",
        "2",
        "--host",
        "127.0.0.1",
        "--port",
        String(port),
        "--admin-port",
        "0",
        "--config",
        ruleDir({ "w.yaml": RULES }),
      ]);
      expect(r.code).toBe(1);
      const line = r.stdout
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .find((l) => l.level === 50 && l.msg.startsWith("cannot listen on") && l.msg.includes("for the gRPC port"));
      expect([line.port, line.code, line.setting]).toEqual([port, "EADDRINUSE", "--port"]);
      expect(r.stdout).not.toMatch(/worker listening/);
    } finally {
      holder.close();
    }
  });

  it("a bad --workers value is a usage error", () => {
    expect(runCli(["serve", "--workers", "0"]).code).toBe(2);
    expect(runCli(["serve", "--workers", "two"]).code).toBe(2);
  });
});

/** The reusePort path of workers.ts, with the fixture's TCP transport (test/fixtures/reuseport-workers.mjs). */
describe("workers that bind with SO_REUSEPORT", () => {
  const FIXTURE = path.join(ROOT, "test/fixtures/reuseport-workers.mjs");
  interface Fixture {
    proc: ChildProcess;
    port: number;
    lines: Record<string, any>[];
    stop(): Promise<number | null>;
  }

  async function startFixture(port: number, reusePort: boolean): Promise<Fixture> {
    const proc = track(spawn(process.execPath, [FIXTURE, String(port), reusePort ? "1" : "0"], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] }));
    const lines: Record<string, any>[] = [];
    const exited = new Promise<number | null>((r) => proc.on("exit", (code) => r(code)));
    let buf = "";
    proc.stdout!.on("data", (c: Buffer) => {
      buf += c;
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        lines.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
      }
    });
    await until(() => lines.some((l) => l.msg === "listening") || proc.exitCode !== null, 10_000, "the fixture's listening line");
    const listening = lines.find((l) => l.msg === "listening");
    if (!listening) throw new Error(`fixture exited: ${JSON.stringify(lines)}`);
    return {
      proc,
      port: listening.port,
      lines,
      stop: () => {
        proc.kill("SIGTERM");
        return exited;
      },
    };
  }

  /** The pid that answered each of n connections made at once. */
  const answeringPids = (port: number, n: number) =>
    Promise.all(
      Array.from(
        { length: n },
        () =>
          new Promise<number>((resolve, reject) => {
            const s = net.connect(port, "127.0.0.1");
            let data = "";
            s.on("data", (c) => (data += c));
            s.on("end", () => resolve(Number(data.trim())));
            s.on("error", reject);
          }),
      ),
    );
  const distinct = (pids: number[]) => [...new Set(pids)].sort((a, b) => a - b);

  let f: Fixture;
  afterAll(async () => {
    if (f?.proc.exitCode === null) await f.stop();
  });

  it("every worker listens itself, the primary not at all, and the kernel spreads connections over them", async () => {
    f = await startFixture(0, true);
    const workers = childPids(f.proc.pid!);
    expect(workers.length).toBe(2);
    expect(f.lines.find((l) => l.msg === "listening")!.balance).toBe("reuseport");
    expect(listeningPids(f.port, [f.proc.pid!, ...workers])).toEqual(workers);
    expect(distinct(await answeringPids(f.port, 32))).toEqual(workers);
  });

  it("a second sluice on the same port fails instead of joining it", () => {
    const r = spawnSync(process.execPath, [FIXTURE, String(f.port), "1"], { cwd: ROOT, encoding: "utf8", timeout: 20_000 });
    expect(r.status).toBe(1);
    const line = r.stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((l) => l.level === 50 && l.msg.startsWith("cannot listen on") && l.msg.includes("for the gRPC port"));
    expect([line.port, line.code]).toEqual([f.port, "EADDRINUSE"]);
  });

  it("a restarted worker binds the port again and gets connections", async () => {
    const [victim, survivor] = childPids(f.proc.pid!);
    process.kill(victim, "SIGKILL");
    await until(() => f.lines.filter((l) => l.msg === "worker listening").length === 3, 10_000, "the restarted worker's listening line");
    const workers = childPids(f.proc.pid!);
    expect(workers).toContain(survivor);
    expect(workers).not.toContain(victim);
    expect(listeningPids(f.port, [f.proc.pid!, ...workers])).toEqual(workers);
    expect(distinct(await answeringPids(f.port, 32))).toEqual(workers);
    expect(await f.stop()).toBe(0);
    expect(workers.filter(alive)).toEqual([]);
  });

  it("without it the primary listens alone and hands connections to both workers", async () => {
    const g = await startFixture(0, false);
    try {
      const workers = childPids(g.proc.pid!);
      expect(g.lines.find((l) => l.msg === "listening")!.balance).toBe("primary");
      expect(listeningPids(g.port, [g.proc.pid!, ...workers])).toEqual([g.proc.pid!]);
      expect(distinct(await answeringPids(g.port, 32))).toEqual(workers);
    } finally {
      expect(await g.stop()).toBe(0);
    }
  });
});

/** Redis-backed limits, so that counts are exact whichever worker answers. */
const GROUP_RULES = `
domain: w
descriptors:
  - key: free
    rate_limit: {unit: hour, requests_per_unit: 1000000}
  - key: shared
    rate_limit: {unit: hour, requests_per_unit: 5}
`;

describe("--workers 2: the admin port answers for the group", () => {
  let s: SluiceProcess;
  afterAll(async () => {
    await s?.stop();
  });

  /** 24 connections at once making 1, 2, 3, 4, 1, 2, ... calls (60 in all): uneven, and spread over both workers. */
  const unevenBatch = async (key: string) => {
    const codes = await Promise.all(Array.from({ length: 24 }, (_, i) => callsOnOneConnection(s.port, key, "x", (i % 4) + 1)));
    return codes.flat();
  };
  const totals = (m: Sample[]) => ({
    ok: sampleValue(m, "sluice_decisions_total", { domain: "w", code: "OK" }),
    over: sampleValue(m, "sluice_decisions_total", { domain: "w", code: "OVER_LIMIT" }),
    calls: sampleValue(m, "sluice_should_rate_limit_duration_seconds_count"),
  });
  const perWorkerCalls = (m: Sample[]) => [0, 1].map((w) => sampleValue(m, "sluice_worker_calls_total", { worker: String(w) }));
  const scrapes = async (n: number) => {
    const out = [];
    for (let i = 0; i < n; i++) out.push(totals(await scrape(s.adminPort)));
    return out;
  };
  const readyz = async () => {
    const res = await fetch(`http://127.0.0.1:${s.adminPort}/readyz`);
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  it("/metrics sums both workers: exact totals per code, the same on every scrape, growing with the calls", async () => {
    s = await startSluice(["--config", ruleDir({ "w.yaml": GROUP_RULES }), "--redis", redis.url, "--workers", "2"], { SLUICE_STORE_TIMEOUT_MS: "2000" });
    expect(await scrapes(3)).toEqual(Array(3).fill({ ok: 0, over: 0, calls: 0 }));
    expect(await unevenBatch("free")).toEqual(Array(60).fill(1));
    expect(await scrapes(6)).toEqual(Array(6).fill({ ok: 60, over: 0, calls: 60 }));
    // Both workers served calls (each has a figure of its own), and together all of them.
    const split = perWorkerCalls(await scrape(s.adminPort));
    expect(split.every((n) => n! > 0)).toBe(true);
    expect(split[0]! + split[1]!).toBe(60);
    // Gauges by meaning, not summed: one store node up, two rules in force; per-process figures per worker.
    const m = await scrape(s.adminPort);
    expect(m.filter((x) => x.name === "sluice_store_node_up").map((x) => x.value)).toEqual([1]);
    expect(sampleValue(m, "sluice_config_rules", { domain: "w" })).toBe(2);
    expect(m.filter((x) => x.name === "nodejs_heap_size_total_bytes").map((x) => x.labels)).toEqual([{ worker: "0" }, { worker: "1" }]);
    expect(m.filter((x) => x.name === "sluice_deny_notes").map((x) => x.labels)).toEqual([{ worker: "0" }, { worker: "1" }]);
    // A shared limit of 5 over 8 connections: 5 OK and 3 OVER_LIMIT, whichever worker answered each.
    const shared = (await Promise.all(Array.from({ length: 8 }, () => callsOnOneConnection(s.port, "shared", "group", 1)))).flat();
    expect(shared.sort()).toEqual([1, 1, 1, 1, 1, 2, 2, 2]);
    expect(await scrapes(6)).toEqual(Array(6).fill({ ok: 65, over: 3, calls: 68 }));
  });

  it("/readyz is the group's: ready with both workers serving the same rules", async () => {
    const workers = childPids(s.proc.pid!);
    // The admin port is served once, by the primary: no worker holds it.
    expect(listeningPids(s.adminPort, [s.proc.pid!, ...workers])).toEqual([s.proc.pid!]);
    for (let i = 0; i < 4; i++) {
      const r = await readyz();
      expect([r.status, r.body.ready, r.body.workers_expected, r.body.workers_serving, r.body.rules_agree]).toEqual([200, true, 2, 2, true]);
      expect(r.body.workers.map((w: { pid: number }) => w.pid).sort((a: number, b: number) => a - b)).toEqual(workers);
    }
    const rules = await (await fetch(`http://127.0.0.1:${s.adminPort}/rules`)).json();
    expect(Object.keys(rules)).toEqual(["domains"]);
    expect(rules.domains.w.rule_count).toBe(2);
  });

  it("/rules shows every worker's RLQS buckets, and ?only=rlqs those alone", async () => {
    // 16 streams on connections of their own (all on one worker: odds of 2^-15), one bucket each.
    const clients = Array.from({ length: 16 }, () => rlqsClient(s.port, { ownConnection: true }));
    const streams = clients.map((c) => c.open());
    const rlqsOf = async (path: string) => (await (await fetch(`http://127.0.0.1:${s.adminPort}${path}`)).json()).rlqs;
    try {
      for (const [i, st] of streams.entries()) st.report("w", [usage({ u: `s${i}` }, 1)]);
      await until(() => streams.every((st) => st.answers > 0), 10_000, "an answer on every stream");
      for (const path of ["/rules?only=rlqs", "/rules"]) {
        const rlqs = await rlqsOf(path);
        expect(rlqs.buckets_total, path).toBe(16);
        expect(rlqs.buckets.map((b: { bucket: { u: string } }) => b.bucket.u).sort(), path).toEqual(Array.from({ length: 16 }, (_, i) => `s${i}`).sort());
      }
    } finally {
      for (const st of streams) st.end();
    }
    await until(async () => (await rlqsOf("/rules?only=rlqs")) === undefined, 10_000, "no buckets once the streams ended");
    for (const c of clients) c.close();
  });

  it("a worker killed with SIGKILL is restarted; the totals never go down and keep counting exactly", async () => {
    const before = await scrape(s.adminPort);
    expect(totals(before)).toEqual({ ok: 65, over: 3, calls: 68 });
    const [victim] = childPids(s.proc.pid!);
    const restartsBefore = workerLines(s).length;
    process.kill(victim, "SIGKILL");
    await until(() => workerLines(s).length === restartsBefore + 1, 10_000, "the restarted worker's listening line");
    // Scrapes while the group heals: never below what was counted.
    for (let i = 0; i < 3; i++) expect(totals(await scrape(s.adminPort))).toEqual({ ok: 65, over: 3, calls: 68 });
    const healed = await readyz();
    expect([healed.status, healed.body.workers_serving]).toEqual([200, 2]);
    expect(childPids(s.proc.pid!)).not.toContain(victim);
    const m = await scrape(s.adminPort);
    expect(sampleValue(m, "sluice_worker_exits_total", { worker: "0" })! + sampleValue(m, "sluice_worker_exits_total", { worker: "1" })!).toBe(1);

    expect(await unevenBatch("free")).toEqual(Array(60).fill(1));
    expect(await scrapes(6)).toEqual(Array(6).fill({ ok: 125, over: 3, calls: 128 }));
    // Both workers, the restarted one included, served some of the new calls.
    const after = perWorkerCalls(await scrape(s.adminPort));
    const restartedSlot = sampleValue(m, "sluice_worker_exits_total", { worker: "0" }) === 1 ? 0 : 1;
    expect(after[restartedSlot]! > 0 && after[restartedSlot]! <= 60).toBe(true);
    expect(after[1 - restartedSlot]! > split(before)[1 - restartedSlot]!).toBe(true);
  });

  const split = (m: Sample[]) => perWorkerCalls(m) as number[];

  it("a worker that does not answer in time (SIGSTOP) is reported; scrapes still answer, from its last counts; /readyz says 503", async () => {
    const ready = await readyz();
    const { worker: slot, pid } = ready.body.workers[0] as { worker: number; pid: number };
    process.kill(pid, "SIGSTOP");
    try {
      const m = await scrape(s.adminPort);
      expect(totals(m)).toEqual({ ok: 125, over: 3, calls: 128 });
      expect([slot, 1 - slot].map((w) => sampleValue(m, "sluice_worker_scrape_ok", { worker: String(w) }))).toEqual([0, 1]);
      expect(sampleValue(m, "sluice_worker_scrape_failures_total", { worker: String(slot) })! > 0).toBe(true);
      // Its per-process figures are left out of that scrape; the other worker's are there.
      expect([slot, 1 - slot].map((w) => sampleValue(m, "nodejs_heap_size_total_bytes", { worker: String(w) }) !== undefined)).toEqual([false, true]);
      await s.waitForLog((l) => l.msg === "worker did not answer a metrics snapshot" && l.pid === pid);
      const r = await readyz();
      expect([r.status, r.body.ready, r.body.workers_serving]).toEqual([503, false, 1]);
    } finally {
      process.kill(pid, "SIGCONT");
    }
    const m = await scrape(s.adminPort);
    expect(totals(m)).toEqual({ ok: 125, over: 3, calls: 128 });
    expect([0, 1].map((w) => sampleValue(m, "sluice_worker_scrape_ok", { worker: String(w) }))).toEqual([1, 1]);
    expect((await readyz()).status).toBe(200);
  });
});

describe("--workers 2 with the reference's HTTP ports", () => {
  it("POST /json goes to a worker; /healthcheck, /rlconfig, /stats and the Prometheus port answer for the group", async () => {
    const s = await startSluice(["--config", ruleDir({ "w.yaml": GROUP_RULES }), "--redis", redis.url, "--workers", "2"], {
      SLUICE_STORE_TIMEOUT_MS: "2000",
      HOST: "127.0.0.1",
      PORT: "0",
      DEBUG_HOST: "127.0.0.1",
      DEBUG_PORT: "0",
      USE_PROMETHEUS: "true",
      PROMETHEUS_ADDR: "127.0.0.1:0",
      PROMETHEUS_PATH: "/prom",
      EXTRA_TAGS: "team:edge",
    });
    try {
      const { httpPort, debugPort, prometheusPort } = await s.waitForLog((l) => l.msg === "listening");
      const health = await fetch(`http://127.0.0.1:${httpPort}/healthcheck`);
      expect([health.status, await health.text()]).toEqual([200, "OK"]);
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) {
        const res = await fetch(`http://127.0.0.1:${httpPort}/json`, {
          method: "POST",
          body: JSON.stringify({ domain: "w", descriptors: [{ entries: [{ key: "shared", value: "json" }] }] }),
        });
        statuses.push(res.status);
        await res.text();
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
      for (const [port, p] of [
        [prometheusPort, "/prom"],
        [s.adminPort, "/metrics"],
      ] as const) {
        const m = parseMetrics(await (await fetch(`http://127.0.0.1:${port}${p}`)).text());
        const team = { team: "edge" };
        expect([
          sampleValue(m, "sluice_decisions_total", { domain: "w", code: "OK", ...team }),
          sampleValue(m, "sluice_decisions_total", { domain: "w", code: "OVER_LIMIT", ...team }),
        ]).toEqual([5, 3]);
        // Handed to the workers in turn: each decided 4.
        expect([0, 1].map((w) => sampleValue(m, "sluice_worker_calls_total", { worker: String(w), ...team }))).toEqual([4, 4]);
      }
      // The reference's ports serve only what the reference serves there; sluice's own routes are on the admin port.
      for (const port of [httpPort, debugPort]) {
        for (const p of ["/top", "/ui", "/rules", "/metrics", "/readyz"]) expect((await fetch(`http://127.0.0.1:${port}${p}`)).status, `${port}${p}`).toBe(404);
      }
      expect((await fetch(`http://127.0.0.1:${s.adminPort}/top`)).status).toBe(200);
      const rl = await fetch(`http://127.0.0.1:${debugPort}/rlconfig`);
      expect(await rl.text()).toBe(
        "w.free: unit=HOUR requests_per_unit=1000000, shadow_mode: false, quota_mode: false\n" +
          "w.shared: unit=HOUR requests_per_unit=5, shadow_mode: false, quota_mode: false\n",
      );
      // /stats: the group's counters under the reference's names, the workers' added up.
      const stats = await (await fetch(`http://127.0.0.1:${debugPort}/stats`)).text();
      expect(stats).toContain("ratelimit.service.rate_limit.w.shared.total_hits: 8\n");
      expect(stats).toContain("ratelimit.service.rate_limit.w.shared.over_limit: 3\n");
    } finally {
      expect(await s.stop()).toBe(0);
    }
  });
});
