// Several `sluice serve` processes sharing one real redis-server, with default settings: the limit holds
// across them, also on a busy host (every core running a busy loop): the store deadline measures the
// store's silence, not this host's scheduling, so no late answer turns into a failure-policy allow.
import { spawn, type ChildProcess } from "node:child_process";
import os from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, retryAfter, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { scrape } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { track } from "../helpers/children.js";
import { sleep } from "../helpers/wait.js";

const RULES = `
domain: shared
descriptors:
  - key: fw
    rate_limit: {unit: hour, requests_per_unit: 120}
  - key: tb
    rate_limit: {unit: hour, requests_per_unit: 120, algorithm: token_bucket}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 20}
`;

let redis: RedisProcess;
const sluices: SluiceProcess[] = [];
const clients: RlsClient[] = [];

beforeAll(async () => {
  redis = await startRedis();
  const dir = ruleDir({ "shared.yaml": RULES });
  for (let i = 0; i < 3; i++) sluices.push(await startSluice(["--config", dir, "--redis", redis.url])); // default settings
  for (const s of sluices) clients.push(rlsClient(s.port));
  // Connections up before the bursts, so they measure decisions, not connection setup.
  for (const c of clients) expect(await c.health()).toBe(1);
});

afterAll(async () => {
  for (const c of clients) c.close();
  for (const s of sluices) await s.stop();
  await redis?.stop();
});

/** One busy loop per core, each in its own process; resolves once all of them spin. */
async function cpuHogs(): Promise<ChildProcess[]> {
  const hogs = Array.from({ length: os.availableParallelism() }, () =>
    track(spawn(process.execPath, ["-e", "console.log('spinning'); for (;;) {}"], { stdio: ["ignore", "pipe", "ignore"] })),
  );
  await Promise.all(hogs.map((h) => new Promise((r) => h.stdout!.once("data", r))));
  return hogs;
}

/** Limits answered by failure policy, summed over the three instances. */
async function policyAnswers(): Promise<number> {
  let n = 0;
  for (const s of sluices) for (const sample of await scrape(s.adminPort)) if (sample.name === "sluice_rule_failure_policy_decisions_total") n += sample.value;
  return n;
}

describe("three sluice processes, one Redis", () => {
  for (const host of ["quiet", "busy"] as const) {
    for (const key of ["fw", "tb"]) {
      it(`${key}, ${host} host: 400 concurrent requests for one key with limit 120 per hour: exactly 120 OK, none by failure policy`, async () => {
        if (key === "fw") await roomInWindow(3600, 15, redisClock(redis)); // a fixed-window burst must not straddle the hour
        const hogs = host === "busy" ? await cpuHogs() : [];
        let answers;
        try {
          answers = await Promise.all(
            Array.from({ length: 400 }, (_, i) =>
              clients[i % 3].shouldRateLimit({ domain: "shared", descriptors: [descriptor({ [key]: `client-${host}` })] }, 60_000),
            ),
          );
        } finally {
          for (const h of hogs) h.kill("SIGKILL");
        }
        const ok = answers.filter((a) => a.overall_code === OK).length;
        const over = answers.filter((a) => a.overall_code === OVER_LIMIT).length;
        expect([ok, over]).toEqual([120, 280]);
        const refused = answers.find((a) => a.overall_code === OVER_LIMIT)!;
        expect(Number(retryAfter(refused))).toBeGreaterThanOrEqual(1);
        expect(await policyAnswers()).toBe(0);
      });
    }
  }

  it("a token bucket of 20 refilling 2/s across 3 instances: 21 at once, then +0.5 s passes, +0.1 s refused, idle 10 s refills", async () => {
    const req = () => clients[0].shouldRateLimit({ domain: "shared", descriptors: [descriptor({ bucket: "k42" })] });
    const burst = await Promise.all(
      Array.from({ length: 21 }, (_, i) => clients[i % 3].shouldRateLimit({ domain: "shared", descriptors: [descriptor({ bucket: "k42" })] })),
    );
    expect(burst.filter((a) => a.overall_code === OK).length).toBe(20);
    expect(burst.filter((a) => a.overall_code === OVER_LIMIT).length).toBe(1);
    await sleep(500);
    expect((await req()).overall_code).toBe(OK);
    await sleep(100);
    const refused = await req();
    expect(refused.overall_code).toBe(OVER_LIMIT);
    expect(retryAfter(refused)).toBe("1");
    const keys = (await redis.cli("KEYS", "sluice:{shared:bucket=k42}:*")).trim().split("\n");
    expect(keys).toEqual(["sluice:{shared:bucket=k42}:tb"]);
    const ttl = Number(await redis.cli("TTL", keys[0]));
    expect(ttl).toBeGreaterThan(8);
    expect(ttl).toBeLessThanOrEqual(10);
    await sleep(10_100);
    expect((await redis.cli("EXISTS", keys[0])).trim()).toBe("0");
    const again = await Promise.all(Array.from({ length: 20 }, () => req()));
    expect(again.every((a) => a.overall_code === OK)).toBe(true);
  }, 30_000);
});

describe("Redis down", () => {
  it("at start-up: sluice still starts, answers by the failure policy at once, and counts in Redis once it is up", async () => {
    const spare = await startRedis();
    const port = spare.port;
    await spare.stop();
    const s = await startSluice(["--config", ruleDir({ "shared.yaml": RULES }), "--redis", `redis://127.0.0.1:${port}`]);
    const c = rlsClient(s.port);
    const one = () => c.shouldRateLimit({ domain: "shared", descriptors: [descriptor({ bucket: "down" })] });
    try {
      expect(await c.health()).toBe(1); // connection up, so the timing below is sluice's alone
      // failure_mode defaults to allow: OK without a counter. Generously bounded: the median of 10 calls.
      const times: number[] = [];
      for (let i = 0; i < 10; i++) {
        const started = performance.now();
        const answer = await one();
        times.push(performance.now() - started);
        expect(answer.overall_code).toBe(OK);
      }
      times.sort((a, b) => a - b);
      expect(times[5]).toBeLessThan(100);
      const back = await startRedis({ port });
      try {
        // Shared counting again: the burst of 20 is counted in Redis, so the 21st call in a row is refused.
        let counted = false;
        for (let i = 0; i < 50 && !counted; i++) {
          counted = (await back.cli("EXISTS", "sluice:{shared:bucket=down}:tb")).trim() === "1";
          if (!counted) {
            await one();
            await sleep(100);
          }
        }
        expect(counted).toBe(true);
      } finally {
        await back.stop();
      }
    } finally {
      c.close();
      expect(await s.stop()).toBe(0);
    }
  }, 30_000);
});
