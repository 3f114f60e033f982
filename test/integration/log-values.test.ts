// No request's descriptor values in any log line at any level: a real sluice at --log-level debug on a real
// Redis gets calls with distinctive values (rule matches, limit overrides, hashed long values, a request
// refused by the bounds, the reference's /json port, a Redis that goes away) and none of the values may
// appear in what it writes to stdout or stderr.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient } from "../helpers/grpc-client.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice } from "../helpers/sluice.js";

const RULES = `domain: lv
descriptors:
  - key: secret_key
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: tenant
    descriptors:
      - key: plan
        rate_limit: {unit: hour, requests_per_unit: 1}
`;

const HOUR = 3;
const VALUES = {
  matched: "VAL-matched-7f3e2a",
  tenant: "VAL-tenant-c41d09",
  plan: "VAL-plan-0b8e55",
  override: "VAL-override-91c2fe",
  long: "VAL-long-" + "q".repeat(90),
  tooLong: "VAL-toolong-" + "z".repeat(300),
  json: "VAL-json-e6f0b4",
  storeDown: "VAL-storedown-a2c9d7",
};

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describe("descriptor values never reach the logs", () => {
  it("at --log-level debug, through refusals, overrides, bounds, /json and a store failure", async () => {
    const s = await startSluice(["--config", ruleDir({ "lv.yaml": RULES }), "--redis", redis.url, "--log-level", "debug"], {
      SLUICE_MAX_VALUE_LENGTH: "200",
      SLUICE_STORE_TIMEOUT_MS: "2000",
      HOST: "127.0.0.1",
      PORT: "0",
    });
    const c = rlsClient(s.port);
    try {
      const { httpPort } = await s.waitForLog((l) => l.msg === "listening");
      const codes = async (req: Parameters<typeof c.shouldRateLimit>[0]) => {
        const out = [];
        for (let i = 0; i < 2; i++) out.push((await c.shouldRateLimit(req)).overall_code);
        return out;
      };
      expect(await codes({ domain: "lv", descriptors: [descriptor({ secret_key: VALUES.matched })] })).toEqual([OK, OVER_LIMIT]);
      expect(
        await codes({
          domain: "lv",
          descriptors: [
            descriptor([
              ["tenant", VALUES.tenant],
              ["plan", VALUES.plan],
            ]),
          ],
        }),
      ).toEqual([OK, OVER_LIMIT]);
      expect(await codes({ domain: "lv", descriptors: [descriptor({ secret_key: VALUES.long })] })).toEqual([OK, OVER_LIMIT]);
      const override = descriptor(
        [
          ["secret_key", VALUES.override],
          ["region", VALUES.override],
        ],
        { limit: { requests_per_unit: 1, unit: HOUR } },
      );
      expect(await codes({ domain: "lv", descriptors: [override] })).toEqual([OK, OVER_LIMIT]);
      await expect(c.shouldRateLimit({ domain: "lv", descriptors: [descriptor({ secret_key: VALUES.tooLong })] })).rejects.toThrow(/INVALID_ARGUMENT/);

      const json = { domain: "lv", descriptors: [{ entries: [{ key: "secret_key", value: VALUES.json }] }] };
      const post = () => fetch(`http://127.0.0.1:${httpPort}/json`, { method: "POST", body: JSON.stringify(json) }).then((r) => r.status);
      expect([await post(), await post()]).toEqual([200, 429]);

      redis.kill();
      await s.waitForLog((l) => l.msg === "rate-limit store down");
      // The failure policy answers (allow by default); whatever is logged on the way must not carry the value.
      expect(await codes({ domain: "lv", descriptors: [descriptor({ secret_key: VALUES.storeDown })] })).toEqual([OK, OK]);
      await redis.restart();
    } finally {
      c.close();
      expect(await s.stop()).toBe(0);
    }

    // The refusals were logged (so the check below looks at lines that exist), the override by its keys only.
    const refused = s.logs.flatMap((l) => (l.includes('"msg":"over limit"') ? JSON.parse(l).refused : []));
    expect(refused.map((r: { rule: string; limit: string }) => `${r.rule}|${r.limit}`).sort()).toEqual([
      "lv.secret_key.region|override",
      "lv.secret_key|rate_limit",
      "lv.secret_key|rate_limit",
      "lv.secret_key|rate_limit",
      "lv.tenant.plan|rate_limit",
    ]);
    const text = s.logs.join("\n");
    for (const [name, value] of Object.entries(VALUES)) {
      expect(text.includes(value), `${name} in the logs:\n${text}`).toBe(false);
    }
  });
});
