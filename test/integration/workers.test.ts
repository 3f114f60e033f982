// `sluice serve --workers N`: N processes on one port, each answering calls; the primary restarts a
// worker that dies and exits 0 on SIGTERM once every worker stopped cleanly.
import fs from "node:fs";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOADER_OPTIONS } from "../../src/server/protos.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";

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

function childPids(pid: number): number[] {
  return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
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
    expect(workerLines(sluice).map((l) => l.port)).toEqual([sluice.port, sluice.port]);
    expect(childPids(sluice.proc.pid!).length).toBe(2);
  });

  it("both workers answer: with the memory store each keeps its own counter", async () => {
    // Limit 1 per process: connections handed to both workers in turn let exactly 2 of 4 calls through.
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) codes.push(await callOnNewConnection(sluice.port, "user", "ann"));
    expect(codes.filter((c) => c === 1).length).toBe(2);
    expect(codes.filter((c) => c === 2).length).toBe(2);
  });

  it("restarts a worker that dies, on the same port", async () => {
    const [victim] = childPids(sluice.proc.pid!);
    process.kill(victim, "SIGKILL");
    await until(() => workerLines(sluice).length === 3, "a third 'worker listening' line");
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

  it("a bad --workers value is a usage error", () => {
    expect(runCli(["serve", "--workers", "0"]).code).toBe(2);
    expect(runCli(["serve", "--workers", "two"]).code).toBe(2);
  });
});
