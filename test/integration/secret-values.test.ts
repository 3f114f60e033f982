// Values of secret descriptor keys (SLUICE_TOP_SECRET_KEYS) never reach Redis, the logs or /metrics in clear:
// after calls through gRPC (allowed and refused, one check and several, detailed_metric, a rule written with a
// secret value, /top's summaries), no key name, string value or sorted-set member holds one, nor any log line
// (at debug) or metric; the keys hold the hash instead.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretValues } from "../../src/core/secret.js";
import { descriptor, rlsClient } from "../helpers/grpc-client.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

const REQUEST_SECRET = "REQUEST-SECRET-7777";
const LITERAL_SECRET = "LITERAL-SECRET-0001";
const TOKEN_SECRET = "TOKEN-SECRET-4242";
const SECRETS = [REQUEST_SECRET, LITERAL_SECRET, TOKEN_SECRET];
const HASH_KEY = "a-deployment-key";

const RULES = `
domain: sec
descriptors:
  - key: api_key
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: api_key
    value: ${LITERAL_SECRET}
    rate_limit: {unit: minute, requests_per_unit: 1}
    descriptors:
      - key: plan
        value: pro
        rate_limit: {unit: minute, requests_per_unit: 5}
        quota: {period: month, limit: 1}
  - key: token
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: token_bucket}
`;

/** Every key's name and readable contents: string values, sorted-set members. */
async function everything(r: Redis): Promise<string[]> {
  const out: string[] = [];
  let cursor = "0";
  do {
    const [next, keys] = await r.scan(cursor, "COUNT", 1000);
    cursor = next;
    for (const k of keys) {
      out.push(k);
      const type = await r.type(k);
      if (type === "string") out.push((await r.getBuffer(k))!.toString("latin1"));
      else if (type === "zset") out.push(...(await r.zrange(k, "0", "-1")));
      else out.push(`(${type})`);
    }
  } while (cursor !== "0");
  return out;
}

describe("secret values", () => {
  let redis: RedisProcess;
  let reader: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    reader = new Redis({ host: "127.0.0.1", port: redis.port, lazyConnect: true });
    await reader.connect();
  });
  afterAll(async () => {
    reader?.disconnect();
    await redis?.stop();
  });

  it("reach neither Redis (SCAN, then every value), nor the log, nor /metrics: the keys hold their hash", async () => {
    const s = await startSluice(["--config", ruleDir({ "sec.yaml": RULES }), "--redis", redis.url], {
      SLUICE_LOG_LEVEL: "debug",
      SLUICE_TOP_HASH_KEY: HASH_KEY,
    });
    const c = rlsClient(s.port);
    try {
      const call = (...ds: Record<string, string>[]) => c.shouldRateLimit({ domain: "sec", descriptors: ds.map((d) => descriptor(d)) });
      const codes: number[] = [];
      for (let i = 0; i < 3; i++) {
        codes.push((await call({ token: TOKEN_SECRET })).overall_code);
        codes.push((await call({ api_key: REQUEST_SECRET })).overall_code);
        codes.push((await call({ api_key: LITERAL_SECRET })).overall_code);
        codes.push((await call({ api_key: LITERAL_SECRET, plan: "pro" })).overall_code);
        codes.push((await call({ token: TOKEN_SECRET }, { api_key: REQUEST_SECRET })).overall_code);
      }
      expect(codes.filter((x) => x === 2).length).toBeGreaterThan(0);
      // /top's summaries reach the store within a second: wait until the literal rule's refusals are there.
      await until(
        async () => ((await (await fetch(`http://127.0.0.1:${s.adminPort}/top`)).json()) as { rules: unknown[] }).rules.length >= 3,
        10_000,
        () => "/top lists the refusing rules",
      );
      const top = await (await fetch(`http://127.0.0.1:${s.adminPort}/top`)).text();
      const metrics = await (await fetch(`http://127.0.0.1:${s.adminPort}/metrics`)).text();
      const stored = await everything(reader);
      await s.stop();
      const logs = s.logs.join("\n");
      for (const secret of SECRETS) {
        expect(
          stored.filter((x) => x.includes(secret)),
          secret,
        ).toEqual([]);
        expect(logs.includes(secret), `${secret} in the log`).toBe(false);
        expect(metrics.includes(secret), `${secret} in /metrics`).toBe(false);
        expect(top.includes(secret), `${secret} in /top`).toBe(false);
      }
      // What is there instead: the hash, in the keys (32 hex digits) and as shown (12).
      const secrets = new SecretValues(["api_key", "token"], HASH_KEY);
      // (A fixed window's key has :1 added in odd windows.)
      expect(stored.filter((k) => k.startsWith(`sluice:{sec:api_key=${secrets.inKey(REQUEST_SECRET)}}:fw60`))).toHaveLength(1);
      expect(stored).toContain(`sluice:{sec:token=${secrets.inKey(TOKEN_SECRET)}}:tb`);
      expect(metrics).toContain(`descriptor="api_key=${secrets.shown(REQUEST_SECRET)}"`);
      expect(metrics).toContain(`rule="sec.api_key_${secrets.shown(LITERAL_SECRET)}.plan_pro"`);
      expect(top).toContain(`sec.api_key_${secrets.shown(LITERAL_SECRET)}`);
    } finally {
      c.close();
      await s.stop();
    }
  });
});
