// Scale out: a real 3-master Redis Cluster and 3 independent Redis servers (sharding), shared by
// several sluice processes. Exactness, key spread, one script call per node, refunds across nodes,
// the deny note against a hot key and one node down.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rendezvous } from "../../src/store/hash.js";
import { descriptor, OK, OVER_LIMIT, retryAfter, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { startRedisCluster, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { scriptCalls, startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { scrape, sampleValue } from "../helpers/prom.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";
import { getWindowCount } from "../helpers/window-key.js";

const RULES = `
domain: s
descriptors:
  - key: one
    rate_limit: {unit: hour, requests_per_unit: 120}
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: pair
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: strict
    failure_mode: deny
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: small
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: big
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: hot
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket}
`;

/** Exactness under bursts needs a timeout above what a loaded 2-core box answers in (NOTES.md). */
const ENV = { SLUICE_STORE_TIMEOUT_MS: "5000", SLUICE_TOP: "off" }; // script calls are counted: no refusal summaries

async function dbsizes(nodes: RedisProcess[]): Promise<number[]> {
  return Promise.all(nodes.map(async (n) => Number((await n.cli("DBSIZE")).trim())));
}

/** The scenarios both deployments must pass. */
function common(name: string, deployment: () => { nodes: RedisProcess[]; clients: RlsClient[] }) {
  const call = (i: number, pairs: [string, string][]) =>
    deployment().clients[i % deployment().clients.length].shouldRateLimit({ domain: "s", descriptors: pairs.map(([k, v]) => descriptor({ [k]: v })) });

  it(`${name}: 400 concurrent requests for one key over 3 sluice processes: exactly the limit of 120 pass`, async () => {
    const answers = await Promise.all(Array.from({ length: 400 }, (_, i) => call(i, [["one", "k"]])));
    expect(answers.filter((a) => a.overall_code === OK)).toHaveLength(120);
    expect(answers.filter((a) => a.overall_code === OVER_LIMIT)).toHaveLength(280);
  });

  it(`${name}: 10,000 clients spread over every node within 10 % of an even share, {same} included`, async () => {
    const { nodes } = deployment();
    const before = await dbsizes(nodes);
    // 25 descriptors per request: 400 requests, each spanning the nodes; half the values carry {same}.
    for (let r = 0; r < 400; r += 20) {
      await Promise.all(
        Array.from({ length: 20 }, (_, j) =>
          call(
            r + j,
            Array.from({ length: 25 }, (_, d) => {
              const n = (r + j) * 25 + d;
              return ["client", n % 2 === 0 ? `user-${n}` : `{same}-${n}`] as [string, string];
            }),
          ),
        ),
      );
    }
    const added = (await dbsizes(nodes)).map((size, i) => size - before[i]);
    expect(added.reduce((a, b) => a + b, 0)).toBe(10_000);
    for (const a of added) {
      expect(a).toBeGreaterThan((10_000 / 3) * 0.9);
      expect(a).toBeLessThan((10_000 / 3) * 1.1);
    }
  });

  it(`${name}: a refused request consumes from none of its limits, also on other nodes (refund)`, async () => {
    const { nodes } = deployment();
    // Find a pair of clients whose keys live on different nodes, via where their keys land.
    await call(0, [["small", "x-0"]]);
    const owner = async (key: string) => {
      for (let i = 0; i < nodes.length; i++) {
        if ((await getWindowCount(nodes[i].cli, key)) !== "") return i;
      }
      return -1;
    };
    const smallNode = await owner("sluice:{s:small=x-0}:fw3600");
    let other = -1;
    for (let n = 0; other < 0; n++) {
      await call(0, [["big", `y-${n}`]]);
      if ((await owner(`sluice:{s:big=y-${n}}:fw3600`)) !== smallNode) other = n;
    }
    const bigKey = `sluice:{s:big=y-${other}}:fw3600`;
    const bigNode = await owner(bigKey);
    expect(bigNode).not.toBe(smallNode);
    const calls = await scriptCalls(...nodes);
    const refused = await call(1, [
      ["big", `y-${other}`],
      ["small", "x-0"],
    ]);
    expect(refused.overall_code).toBe(OVER_LIMIT);
    expect(refused.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      [OK, 9],
      [OVER_LIMIT, 0],
    ]);
    // The big limit's node took the hit and gave it back: still 1 used of 10.
    expect(await getWindowCount(nodes[bigNode].cli, bigKey)).toBe("1");
    // One apply per node, then one refund on the node that had consumed.
    expect((await scriptCalls(...nodes)) - calls).toBe(3);
  });
}

describe("3 independent Redis servers (sharding)", () => {
  const shards: RedisProcess[] = [];
  const sluices: SluiceProcess[] = [];
  const clients: RlsClient[] = [];

  beforeAll(async () => {
    for (let i = 0; i < 3; i++) shards.push(await startRedis());
    const dir = ruleDir({ "s.yaml": RULES });
    const urls = shards.map((s) => s.url).join(",");
    for (let i = 0; i < 3; i++) sluices.push(await startSluice(["--config", dir, "--redis", urls], ENV));
    for (const s of sluices) clients.push(rlsClient(s.port));
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    for (const s of sluices) expect(await s.stop()).toBe(0);
    for (const s of shards) await s.stop();
  });

  common("shards", () => ({ nodes: shards, clients }));

  it("one script call per node: 6 descriptors over 3 shards cost 3 calls", async () => {
    const calls = await scriptCalls(...shards);
    await clients[0].shouldRateLimit({ domain: "s", descriptors: Array.from({ length: 6 }, (_, i) => descriptor({ client: `rt-${i}` })) });
    const ring = new Rendezvous(shards.map((s) => `127.0.0.1:${s.port}`));
    const used = new Set(Array.from({ length: 6 }, (_, i) => ring.pick(`s:client=rt-${i}`)));
    expect((await scriptCalls(...shards)) - calls).toBe(used.size);
  });

  it("a hot refused key through 3 instances for 3 s costs Redis about one call per instance per Retry-After", async () => {
    const calls = await scriptCalls(...shards);
    let stop = false;
    const answers: { code: number; retry?: string }[] = [];
    const hammer = async (i: number) => {
      while (!stop) {
        const a = await clients[i].shouldRateLimit({ domain: "s", descriptors: [descriptor({ hot: "attacker" })] });
        answers.push({ code: a.overall_code, retry: retryAfter(a) });
      }
    };
    const started = Date.now();
    const loops = [0, 1, 2].map(hammer);
    await sleep(3000);
    stop = true;
    await Promise.all(loops);
    const seconds = (Date.now() - started) / 1000;
    const used = (await scriptCalls(...shards)) - calls;
    // Bucket of 1 refilling 1 per second: about one pass per second, everything else refused.
    const passed = answers.filter((a) => a.code === OK).length;
    expect(passed).toBeGreaterThanOrEqual(Math.floor(seconds));
    expect(passed).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
    for (const a of answers.filter((x) => x.code === OVER_LIMIT)) expect(a.retry).toBe("1");
    // Per Retry-After period (1 s) and instance: the call that is refused and notes the key, plus
    // the passes. Without the note every one of the thousands of requests would be a call.
    const periods = Math.ceil(seconds) + 1;
    expect(answers.length).toBeGreaterThan(20 * used);
    expect(used).toBeLessThanOrEqual(periods * (3 + 1));
  });

  it("one of 3 shards killed: its clients get their failure_mode, the others keep exact shared limits", async () => {
    const ring = new Rendezvous(shards.map((s) => `127.0.0.1:${s.port}`));
    const victim = 2;
    shards[victim].kill("SIGKILL");
    await new Promise((r) => shards[victim].proc.once("exit", r));
    try {
      const n = 600;
      const first = await Promise.all(
        Array.from({ length: n }, (_, i) => clients[i % 3].shouldRateLimit({ domain: "s", descriptors: [descriptor({ strict: `c-${i}` })] })),
      );
      const onVictim = Array.from({ length: n }, (_, i) => ring.pick(`s:strict=c-${i}`) === victim);
      // failure_mode deny: exactly the victim's clients are refused, about a third of them.
      expect(first.map((a) => a.overall_code === OVER_LIMIT)).toEqual(onVictim);
      const share = onVictim.filter(Boolean).length / n;
      expect(share).toBeGreaterThan(0.25);
      expect(share).toBeLessThan(0.42);
      // The others keep exact shared limits across instances: 2 per hour, the first already used.
      const live = Array.from({ length: n }, (_, i) => i)
        .filter((i) => !onVictim[i])
        .slice(0, 100);
      const more = await Promise.all(
        live.flatMap((i) => [0, 1, 2].map((k) => clients[(i + k) % 3].shouldRateLimit({ domain: "s", descriptors: [descriptor({ strict: `c-${i}` })] }))),
      );
      for (let j = 0; j < live.length; j++) {
        const codes = more.slice(j * 3, j * 3 + 3).map((a) => a.overall_code);
        expect(codes.filter((c) => c === OK)).toHaveLength(1);
      }
    } finally {
      await shards[victim].restart();
    }
  });
});

describe("a 3-master Redis Cluster", () => {
  let cluster: RedisClusterProcess;
  const sluices: SluiceProcess[] = [];
  const clients: RlsClient[] = [];

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    const dir = ruleDir({ "s.yaml": RULES });
    for (let i = 0; i < 3; i++) sluices.push(await startSluice(["--config", dir, "--redis-cluster", cluster.spec], ENV));
    for (const s of sluices) clients.push(rlsClient(s.port));
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.close();
    for (const s of sluices) expect(await s.stop()).toBe(0);
    await cluster?.stop();
  });

  common("cluster", () => ({ nodes: cluster.nodes, clients }));

  it("reports store calls per master in /metrics", async () => {
    const samples = await scrape(sluices[0].adminPort);
    for (const n of cluster.nodes) {
      expect(sampleValue(samples, "sluice_store_call_duration_seconds_count", { node: `127.0.0.1:${n.port}` })).toBeGreaterThan(0);
    }
  });

  it("one master killed: keys on the others keep exact shared limits, its keys answer by failure_mode", async () => {
    const victim = cluster.nodes[1];
    victim.kill("SIGKILL");
    await new Promise((r) => victim.proc.once("exit", r));
    const n = 300;
    const first = await Promise.all(
      Array.from({ length: n }, (_, i) => clients[i % 3].shouldRateLimit({ domain: "s", descriptors: [descriptor({ strict: `k-${i}` })] })),
    );
    const refused = first.filter((a) => a.overall_code === OVER_LIMIT).length;
    expect(refused / n).toBeGreaterThan(0.2);
    expect(refused / n).toBeLessThan(0.45);
    const live = Array.from({ length: n }, (_, i) => i)
      .filter((i) => first[i].overall_code === OK)
      .slice(0, 60);
    const more = await Promise.all(
      live.flatMap((i) => [0, 1, 2].map((k) => clients[(i + k) % 3].shouldRateLimit({ domain: "s", descriptors: [descriptor({ strict: `k-${i}` })] }))),
    );
    for (let j = 0; j < live.length; j++) {
      expect(more.slice(j * 3, j * 3 + 3).filter((a) => a.overall_code === OK)).toHaveLength(1);
    }
  }, 30_000);
});
