// Exact on a busy host: three `sluice serve` with default settings on one Redis, every core running
// a busy loop, 400 concurrent calls for one key: exactly the limit passes. The store deadline measures
// the store's silence, not this host's scheduling, so no late answer turns into a failure-policy allow.
import { spawn, type ChildProcess } from "node:child_process";
import os from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { scrape } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";

const RULES = `
domain: busy
descriptors:
  - key: fw
    rate_limit: {unit: hour, requests_per_unit: 120}
  - key: tb
    rate_limit: {unit: hour, requests_per_unit: 120, algorithm: token_bucket}
`;

let redis: RedisProcess;
const sluices: SluiceProcess[] = [];
const clients: RlsClient[] = [];

beforeAll(async () => {
  redis = await startRedis();
  const dir = ruleDir({ "busy.yaml": RULES });
  for (let i = 0; i < 3; i++) sluices.push(await startSluice(["--config", dir, "--redis", redis.url])); // default settings
  for (const s of sluices) clients.push(rlsClient(s.port));
  // Connections up before the load, so the test measures decisions, not connection setup.
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
    spawn(process.execPath, ["-e", "console.log('spinning'); for (;;) {}"], { stdio: ["ignore", "pipe", "ignore"] }),
  );
  await Promise.all(hogs.map((h) => new Promise((r) => h.stdout!.once("data", r))));
  return hogs;
}

describe("busy host: every core spinning", () => {
  for (const key of ["fw", "tb"]) {
    it(`${key}: 400 concurrent calls over 3 instances, limit 120 per hour: exactly 120 pass, none by failure policy`, async () => {
      if (key === "fw") await roomInWindow(3600, 15, redisClock(redis));
      const hogs = await cpuHogs();
      let answers;
      try {
        answers = await Promise.all(
          Array.from({ length: 400 }, (_, i) => clients[i % 3].shouldRateLimit({ domain: "busy", descriptors: [descriptor({ [key]: "one" })] }, 60_000)),
        );
      } finally {
        for (const h of hogs) h.kill("SIGKILL");
      }
      const ok = answers.filter((a) => a.overall_code === OK).length;
      const over = answers.filter((a) => a.overall_code === OVER_LIMIT).length;
      expect([ok, over]).toEqual([120, 280]);
      let policy = 0;
      for (const s of sluices) {
        for (const sample of await scrape(s.adminPort)) if (sample.name === "sluice_rule_failure_policy_decisions_total") policy += sample.value;
      }
      expect(policy).toBe(0);
    });
  }
});
