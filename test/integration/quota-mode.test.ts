// quota_mode and the global modes over real gRPC on a real redis-server: the scenarios of
// test/helpers/quota-mode.ts (the memory store runs the same ones in test/unit/limiter.quota-mode.test.ts)
// with the same exact answers and rule counters. The global modes are Limiter options (no flag yet), so
// the server runs in process: the gRPC server (h2/), a RedisStore whose scripts' time is pinned, and the
// real Metrics as the call observer.
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Limiter } from "../../src/limiter/limiter.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { startH2Server } from "../../src/server/grpc/h2/server.js";
import type { RunningTransport } from "../../src/server/grpc/grpc-contract.js";
import { serveSettings } from "../../src/settings/settings.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { Metrics } from "../../src/telemetry/metrics.js";
import { rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import {
  answerOf,
  QUOTA_MODE_DOMAIN,
  QUOTA_MODE_RULES,
  QUOTA_MODE_SCENARIOS,
  QUOTA_MODE_TIME_US,
  wireDescriptors,
  type Scenario,
} from "../helpers/quota-mode.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";

const rules = loadRuleFiles([{ name: "qm.yaml", text: QUOTA_MODE_RULES }], { mergeDomains: false }).rules!;
const settings = serveSettings([], {});
const silent = pino({ level: "silent" });

let redis: RedisProcess;
let store: RedisStore;
let running: { server: RunningTransport; client: RlsClient } | undefined;

beforeAll(async () => {
  redis = await startRedis();
  store = new RedisStore({
    servers: [{ host: "127.0.0.1", port: redis.port }],
    timeoutMs: 10_000,
    logger: silent,
    clock: new ManualClock(QUOTA_MODE_TIME_US),
  });
  await store.start();
});
afterEach(async () => {
  running?.client.close();
  await running?.server.shutdown(100);
  running = undefined;
  await redis.cli("FLUSHALL");
});
afterAll(async () => {
  await store?.close();
  await redis?.stop();
});

/** A gRPC server on a limiter with the scenario's options, and the metrics it reports to. */
async function serve(s: Scenario) {
  const clock = new ManualClock(QUOTA_MODE_TIME_US);
  const limiter = new Limiter(rules, store, { clock, ...s.options });
  const metrics = new Metrics({ rules: () => rules, store: () => store.status(), denyNotes: () => limiter.denyNoteCount }, { processMetrics: false });
  let shadowed = 0;
  const server = await startH2Server(limiter, {
    host: "127.0.0.1",
    port: 0,
    bounds: settings.bounds,
    maxMessageBytes: settings.maxMessageBytes,
    logger: silent,
    observer: {
      decided(req, decision, seconds) {
        metrics.decided(req, decision, seconds);
        if (decision.shadowed) shadowed++;
      },
      failed: (code, seconds) => metrics.failed(code, seconds),
    },
  });
  const client = rlsClient(server.port);
  running = { server, client };
  return { client, metrics, shadowed: () => shadowed };
}

describe("quota_mode and the global modes over gRPC on Redis", () => {
  for (const s of QUOTA_MODE_SCENARIOS) {
    it(s.name, async () => {
      const { client, metrics, shadowed } = await serve(s);
      for (const [i, step] of s.steps.entries()) {
        const res = await client.shouldRateLimit({ domain: QUOTA_MODE_DOMAIN, descriptors: wireDescriptors(step.send) });
        expect(answerOf(res), `step ${i + 1}`).toEqual(step.expect);
        // A refusal carries its JSON body; an OK (also a shadowed one) carries none.
        expect(res.raw_body === undefined || res.raw_body.length === 0, `step ${i + 1} body`).toBe(step.expect.code === "OK");
      }
      const counts = (rule: string) => [...metrics.rules.all()].find((c) => c.domain === QUOTA_MODE_DOMAIN && c.rule === rule);
      for (const [rule, expected] of Object.entries(s.counters)) expect(counts(rule), rule).toMatchObject(expected);
      expect(shadowed()).toBe(s.shadowed);
    });
  }

  it("global shadow mode's would-be refusals reach /metrics as shadow_mode, not over_limit; the decisions as OK", async () => {
    const s = QUOTA_MODE_SCENARIOS.find((x) => x.options.globalShadowMode && !x.options.globalQuotaMode)!;
    const { client, metrics } = await serve(s);
    for (const step of s.steps) await client.shouldRateLimit({ domain: QUOTA_MODE_DOMAIN, descriptors: wireDescriptors(step.send) });
    const text = await metrics.text();
    const line = (name: string, labels: string) => text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
    const user = 'domain="qm",rule="qm.user",limit="rate_limit"';
    expect(line("sluice_rule_shadow_mode_total", user)).toBe(`sluice_rule_shadow_mode_total{${user}} 2`);
    expect(line("sluice_rule_over_limit_total", user)).toBe(`sluice_rule_over_limit_total{${user}} 0`);
    expect(line("sluice_decisions_total", 'domain="qm",code="OK"')).toBe('sluice_decisions_total{domain="qm",code="OK"} 6');
    expect(line("sluice_decisions_total", 'domain="qm",code="OVER_LIMIT"')).toBe('sluice_decisions_total{domain="qm",code="OVER_LIMIT"} 0');
  });

  it("Redis holds what the reference's quota example consumes: a passing request takes from the quota-mode descriptor under its limit, a refused one from none", async () => {
    const { client } = await serve(QUOTA_MODE_SCENARIOS[0]);
    const call = () =>
      client.shouldRateLimit({
        domain: QUOTA_MODE_DOMAIN,
        descriptors: wireDescriptors([
          ["service", "service_1"],
          ["service", "service_2"],
          ["user", "u"],
        ]),
      });
    const get = async (key: string) => (await redis.cli("GET", key)).trim();
    const keys = ["sluice:{qm:service=service_1}:fw60", "sluice:{qm:service=service_2}:fw60", "sluice:{qm:user=u}:fw60"];
    await call();
    expect(await Promise.all(keys.map(get))).toEqual(["1", "1", "1"]);
    await call(); // service_1 over: the others consume
    expect(await Promise.all(keys.map(get))).toEqual(["1", "2", "2"]);
    await call(); // both over: refused, user's hit given back
    expect(await Promise.all(keys.map(get))).toEqual(["1", "2", "2"]);
  });
});
