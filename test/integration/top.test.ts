// Who is being limited, across instances: three sluice processes on one real Redis, refusals sent over
// real gRPC; /top on every instance and the sluice_rule_refused_clients gauge agree with what was sent.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OVER_LIMIT, rlsClient, type RlsClient, type WireRequest } from "../helpers/grpc-client.js";
import { sampleValue, scrape } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";

const RULES = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: account
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: api_key
    rate_limit: { unit: hour, requests_per_unit: 1 }
`;
const ATTACKER = "203.0.113.7";
const CLIENTS = 5000;

interface TopAnswer {
  window: string;
  rules: { domain: string; rule: string; limit: string; refused: number; refused_clients: number; top: { client: string; refused: number }[] }[];
}

async function top(port: number, query = ""): Promise<TopAnswer> {
  const res = await fetch(`http://127.0.0.1:${port}/top${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as TopAnswer;
}

/** Sends every request with `concurrency` in flight, spread over the clients; counts the refusals. */
async function send(clients: RlsClient[], requests: WireRequest[], concurrency: number): Promise<number> {
  let next = 0;
  let refused = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      for (let i = next++; i < requests.length; i = next++) {
        const res = await clients[(i + w) % clients.length].shouldRateLimit(requests[i]);
        if (res.overall_code === OVER_LIMIT) refused++;
      }
    }),
  );
  return refused;
}

describe("/top across three instances on one Redis", () => {
  let redis: RedisProcess;
  let sluices: SluiceProcess[] = [];
  let clients: RlsClient[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    const dir = ruleDir({ "edge.yaml": RULES });
    sluices = await Promise.all(Array.from({ length: 3 }, () => startSluice(["--config", dir, "--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "2000" })));
    clients = sluices.map((s) => rlsClient(s.port));
  }, 30_000);

  afterAll(async () => {
    for (const c of clients) c.close();
    await Promise.all(sluices.map((s) => s.stop()));
    await redis?.stop();
  });

  it("tells one attacker from 5,000 refused clients, on every instance, and the metric agrees", async () => {
    const attack: WireRequest[] = Array.from({ length: 10_001 }, () => ({
      domain: "edge",
      descriptors: [{ entries: [{ key: "remote_address", value: ATTACKER }] }],
    }));
    const many: WireRequest[] = [];
    for (let round = 0; round < 3; round++) {
      for (let c = 0; c < CLIENTS; c++) many.push({ domain: "edge", descriptors: [{ entries: [{ key: "account", value: `c${c}` }] }] });
    }
    const evals = async () => Number(/cmdstat_eval:calls=(\d+)/.exec(await redis.cli("INFO", "commandstats"))?.[1] ?? 0);
    const evalsBefore = await evals();
    const started = performance.now();
    const [attackRefused, manyRefused] = await Promise.all([send(clients, attack, 48), send(clients, many, 48)]);
    expect(attackRefused).toBe(10_000);
    expect(manyRefused).toBe(2 * CLIENTS);

    // Summaries reach the store within a second or two: wait for every refusal, polling /top.
    const deadline = Date.now() + 30_000;
    let answers: TopAnswer[] = [];
    for (;;) {
      answers = await Promise.all(sluices.map((s) => top(s.adminPort)));
      // Every instance's answer: each reads the store when asked, and one may ask before the last flush landed.
      const least = Math.min(...answers.map((a) => a.rules.reduce((n, r) => n + r.refused, 0)));
      if (least >= attackRefused + manyRefused || Date.now() > deadline) break;
      await sleep(100);
    }
    for (const a of answers) {
      expect(a.window).toBe("1m");
      expect(a.rules.map((r) => [r.domain, r.rule, r.limit, r.refused])).toEqual([
        ["edge", "edge.account", "1/HOUR", 10_000],
        ["edge", "edge.remote_address", "1/HOUR", 10_000],
      ]);
      const byRule = Object.fromEntries(a.rules.map((r) => [r.rule, r]));
      expect(byRule["edge.remote_address"].refused_clients).toBe(1);
      expect(byRule["edge.remote_address"].top).toEqual([{ client: `remote_address=${ATTACKER}`, refused: 10_000 }]);
      expect(Math.abs(byRule["edge.account"].refused_clients - CLIENTS)).toBeLessThanOrEqual(CLIENTS * 0.02);
      // 5,000 clients through summaries of 64: the counts shown are lower bounds, never above the truth.
      expect(byRule["edge.account"].top.length).toBeLessThanOrEqual(10);
      for (const c of byRule["edge.account"].top) expect(c.refused).toBeLessThanOrEqual(2);
    }
    // Summaries cost at most one store call per instance and second (one EVAL; the limiter calls FCALL).
    const seconds = (performance.now() - started) / 1000;
    expect(await evals()).toBeGreaterThan(evalsBefore);
    expect((await evals()) - evalsBefore).toBeLessThanOrEqual(3 * (Math.ceil(seconds) + 1));
    // The same figures in every instance's answer (one store), and in the gauge.
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[2]).toEqual(answers[0]);
    const samples = await scrape(sluices[2].adminPort);
    const byRule = Object.fromEntries(answers[0].rules.map((r) => [r.rule, r.refused_clients]));
    for (const rule of ["edge.account", "edge.remote_address"]) {
      expect(sampleValue(samples, "sluice_rule_refused_clients", { domain: "edge", rule, window: "1m" })).toBe(byRule[rule]);
      expect(sampleValue(samples, "sluice_rule_refused_clients", { domain: "edge", rule, window: "1h" })).toBe(byRule[rule]);
    }

    // The attacker alone, most refused first; filters and n.
    const one = await top(sluices[1].adminPort, "?domain=edge&rule=edge.remote_address&window=1h&n=1");
    expect(one).toEqual({
      window: "1h",
      rules: [
        {
          domain: "edge",
          rule: "edge.remote_address",
          limit: "1/HOUR",
          refused: 10_000,
          refused_clients: 1,
          top: [{ client: `remote_address=${ATTACKER}`, refused: 10_000 }],
        },
      ],
    });
  }, 120_000);

  it("shows secret values hashed, the same on every instance", async () => {
    const req = { domain: "edge", descriptors: [{ entries: [{ key: "api_key", value: "sk-live-very-secret" }] }] };
    for (let i = 0; i < 3; i++) await clients[i].shouldRateLimit(req);
    let rule: TopAnswer["rules"][number] | undefined;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      rule = (await top(sluices[0].adminPort, "?rule=edge.api_key")).rules[0];
      if (rule?.refused === 2) break;
      await sleep(100);
    }
    // HMAC-SHA256 under the default key, first 12 hex digits (docs/top.md shows how to compute it).
    const { createHmac } = await import("node:crypto");
    const hash = createHmac("sha256", "sluice-top").update("sk-live-very-secret").digest("hex").slice(0, 12);
    expect(rule?.top).toEqual([{ client: `api_key=#${hash}`, refused: 2 }]);
    const text = await (await fetch(`http://127.0.0.1:${sluices[2].adminPort}/top?n=100`)).text();
    expect(text).not.toContain("very-secret");
  });

  it("with --workers, the primary's admin port answers /top and /ui from a worker", async () => {
    const group = await startSluice(["--config", ruleDir({ "edge.yaml": RULES }), "--redis", redis.url, "--workers", "2"]);
    try {
      expect(await top(group.adminPort, "?n=3")).toEqual(await top(sluices[0].adminPort, "?n=3"));
      const ui = await fetch(`http://127.0.0.1:${group.adminPort}/ui`);
      expect(ui.status).toBe(200);
      expect(ui.headers.get("content-type")).toBe("text/html; charset=utf-8");
      // The worker's answer keeps its own policy through the primary.
      expect(ui.headers.get("content-security-policy")).toMatch(/^default-src 'none'; script-src 'sha256-/);
      // The primary's admin port checks Host names as a single process's does.
      const { get } = await import("node:http");
      const status = await new Promise<number>((resolve, reject) =>
        get({ host: "127.0.0.1", port: group.adminPort, path: "/top", headers: { host: "evil.example" } }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        }).on("error", reject),
      );
      expect(status).toBe(421);
      expect(await ui.text()).toContain("<title>sluice: who is being limited</title>");
    } finally {
      await group.stop();
    }
  }, 30_000);

  it("refuses bad parameters with a clear 400", async () => {
    const port = sluices[0].adminPort;
    for (const [q, msg] of [
      ["?window=5m", "window must be one of 1m, 1h"],
      ["?n=1000", "n must be a whole number from 0 to 100"],
      ["?n=-1", "n must be a whole number from 0 to 100"],
    ]) {
      const res = await fetch(`http://127.0.0.1:${port}/top${q}`);
      expect(res.status).toBe(400);
      expect(await res.text()).toBe(`${msg}\n`);
    }
  });
});
