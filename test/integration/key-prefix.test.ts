// --key-prefix (the reference's CACHE_KEY_PREFIX): two deployments on one real Redis do not share
// counters, every key carries its deployment's prefix (SCAN), expires, and `explain` shows it; on a
// Redis Cluster the hash tag still puts each descriptor's keys in one slot.
import { isSummaryKey } from "../../src/insight/windows.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { keyScanPattern } from "../../src/core/keys.js";
import { descriptor, OK, OVER_LIMIT, rlsClient } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { ownerOf, startRedisCluster, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";
import { getWindowCount, windowKey } from "../helpers/window-key.js";

const RULES = `
domain: web
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: token_bucket, burst: 2}
    quota: {period: day, limit: 100}
`;
const rules = ruleDir({ "web.yaml": RULES });

const running: { stop(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});
async function sluiceWith(args: string[], env: Record<string, string> = {}): Promise<SluiceProcess> {
  // Exact counts on a busy host: a store call must not time out into the failure policy.
  const s = await startSluice(["--config", rules, ...args], { SLUICE_STORE_TIMEOUT_MS: "2000", ...env });
  running.push(s);
  return s;
}

/** Overall codes of `n` calls of one descriptor, one after another. */
async function codes(s: SluiceProcess, entries: Record<string, string>, n: number): Promise<number[]> {
  const client = rlsClient(s.port);
  try {
    const out = [];
    for (let i = 0; i < n; i++) out.push((await client.shouldRateLimit({ domain: "web", descriptors: [descriptor(entries)] })).overall_code);
    return out;
  } finally {
    client.close();
  }
}

const THREE_OF_FIVE = [OK, OK, OK, OVER_LIMIT, OVER_LIMIT];

describe("two deployments, one Redis", () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("do not share counters; keys carry each prefix and expire", async () => {
    const a = await sluiceWith(["--redis", redis.url, "--key-prefix", "team-a:"]);
    const b = await sluiceWith([], { REDIS_SOCKET_TYPE: "tcp", REDIS_URL: `127.0.0.1:${redis.port}`, CACHE_KEY_PREFIX: "team-b_" });
    const plain = await sluiceWith(["--redis", redis.url]);
    await roomInWindow(3600, 30, redisClock(redis));

    expect(await codes(a, { client: "c1" }, 5)).toEqual(THREE_OF_FIVE);
    expect(await codes(b, { client: "c1" }, 5)).toEqual(THREE_OF_FIVE);
    expect(await codes(plain, { client: "c1" }, 5)).toEqual(THREE_OF_FIVE);
    expect(await codes(a, { user: "u1" }, 3)).toEqual([OK, OK, OVER_LIMIT]);
    expect(await codes(b, { user: "u1" }, 3)).toEqual([OK, OK, OVER_LIMIT]);

    const nowS = Number((await redis.cli("TIME")).split("\n")[0]);
    const day = new Date(nowS * 1000).toISOString().slice(0, 10);
    const hourKey = (key: string) => windowKey(key, 3600, nowS * 1000); // the run had room in its hour
    // Counters; the refusal summaries (docs/top.md) are checked apart below.
    const scanAll = async (pattern: string) =>
      (await redis.cli("--scan", "--pattern", pattern))
        .split("\n")
        .filter((k) => k !== "")
        .sort();
    const scan = async (pattern: string) => (await scanAll(pattern)).filter((k) => !isSummaryKey(k));
    expect(await scan(keyScanPattern("team-a:"))).toEqual([
      hourKey("team-a:sluice:{web:client=c1}:fw3600"),
      `team-a:sluice:{web:user=u1}:q:${day}`,
      "team-a:sluice:{web:user=u1}:tb",
    ]);
    // b runs in the reference's environment: its fixed window counts in the reference's key (the hour's
    // start at the end), refused requests too, as the reference counts; the others keep sluice's keys.
    const hour = Math.floor(Number((await redis.cli("TIME")).split("\n")[0]) / 3600) * 3600;
    expect(await scan(keyScanPattern("team-b_"))).toEqual([`team-b_sluice:{web:user=u1}:q:${day}`, "team-b_sluice:{web:user=u1}:tb"]);
    expect(await scan("team-b_web_*")).toEqual([`team-b_web_client_c1_${hour}`]);
    expect(await scan("*")).toEqual([...(await scan("sluice:*")), ...(await scan("team-a:*")), ...(await scan("team-b_*"))].sort());
    expect(await scan("sluice:*")).toEqual([hourKey("sluice:{web:client=c1}:fw3600")]);
    for (const key of [hourKey("team-a:sluice:{web:client=c1}:fw3600"), hourKey("sluice:{web:client=c1}:fw3600")]) {
      expect((await redis.cli("GET", key)).trim()).toBe("3");
    }
    // 3 allowed and the first refusal; the fifth is answered from the deny note (as the reference's local cache would) and counts nowhere.
    expect((await redis.cli("GET", `team-b_web_client_c1_${hour}`)).trim()).toBe("4");
    for (const key of await scan("team-*")) {
      const ttl = Number(await redis.cli("PTTL", key));
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(key.includes(":q:") ? 86_400_000 : 3_600_000);
    }
    // Each deployment's refusal summaries carry its prefix (under its scan pattern) and expire.
    for (const prefix of ["team-a:", "team-b_", ""]) {
      // Sent within a second of the refusals: waited for.
      let summaries: string[] = [];
      for (const deadline = Date.now() + 5000; summaries.length === 0 && Date.now() < deadline; await sleep(50)) {
        summaries = (await scanAll(keyScanPattern(prefix))).filter(isSummaryKey);
      }
      expect(summaries.length, prefix).toBeGreaterThan(0);
      for (const key of summaries) {
        expect(key.startsWith(`${prefix}sluice:{${prefix}sluice-top}:`), key).toBe(true);
        const ttl = Number(await redis.cli("PTTL", key));
        expect(ttl > 0 && ttl <= 4_800_000, key).toBe(true);
      }
    }
    expect(await scanAll("*")).toEqual([...(await scanAll("sluice:*")), ...(await scanAll("team-a:*")), ...(await scanAll("team-b_*"))].sort());
  });
});

describe("explain shows the prefix", () => {
  it("from --key-prefix, SLUICE_KEY_PREFIX or CACHE_KEY_PREFIX", () => {
    const args = ["explain", "--config", rules, "--domain", "web", "--descriptor", "client=c1"];
    expect(runCli([...args, "--key-prefix", "team-a:"]).stdout).toContain(
      "\n      key: team-a:sluice:{web:client=c1}:fw3600 (even windows; odd windows: team-a:sluice:{web:client=c1}:fw3600:1)\n",
    );
    expect(runCli(args, { SLUICE_KEY_PREFIX: "s_" }).stdout).toContain(
      "\n      key: s_sluice:{web:client=c1}:fw3600 (even windows; odd windows: s_sluice:{web:client=c1}:fw3600:1)\n",
    );
    // CACHE_KEY_PREFIX is the reference's environment: its keys (SLUICE_REFERENCE_KEYS), prefixed, the hour's start at the end.
    expect(runCli(args, { CACHE_KEY_PREFIX: "ref_" }).stdout).toMatch(/\n {6}key: ref_web_client_c1_\d+\n/);
    expect(runCli(args, { CACHE_KEY_PREFIX: "ref_", SLUICE_REFERENCE_KEYS: "false" }).stdout).toContain(
      "\n      key: ref_sluice:{web:client=c1}:fw3600 (even windows; odd windows: ref_sluice:{web:client=c1}:fw3600:1)\n",
    );
    const bad = runCli([...args, "--key-prefix", "{x}"]);
    expect([bad.code, bad.stderr.split("\n")[0]]).toEqual([2, "sluice: --key-prefix must not contain { or } (a Redis Cluster hash tag), got '{x}'"]);
  });
});

describe("on a Redis Cluster", () => {
  let cluster: RedisClusterProcess;
  beforeAll(async () => {
    cluster = await startRedisCluster(3);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it("a prefixed descriptor's keys stay in its hash tag's slot; counts are exact on every master", async () => {
    const s = await sluiceWith(["--redis-cluster", cluster.spec, "--key-prefix", "edge:"]);
    await roomInWindow(3600, 30, redisClock(cluster.nodes[0]));
    const clients = ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"];
    const owners = new Set<number>();
    for (const c of clients) {
      expect(await codes(s, { client: c }, 5)).toEqual(THREE_OF_FIVE);
      expect(await codes(s, { user: c }, 3)).toEqual([OK, OK, OVER_LIMIT]);
      const key = `edge:sluice:{web:client=${c}}:fw3600`;
      const owner = await ownerOf(cluster, key);
      owners.add(owner);
      expect(owner).toBe(await ownerOf(cluster, `{web:client=${c}}`));
      expect(await getWindowCount(cluster.nodes[owner].cli, key)).toBe("3");
      expect(await ownerOf(cluster, `edge:sluice:{web:user=${c}}:tb`)).toBe(await ownerOf(cluster, `edge:sluice:{web:user=${c}}:q:2026-01-01`));
    }
    expect(owners.size).toBeGreaterThan(1); // the prefix did not pull every key into one slot
  });
});
