// A second Redis for limits whose unit is a second (--redis-per-second, the reference's REDIS_PERSECOND):
// keys land on the right server, one script call per store per request, a refusal in one store gives
// back what the other took, and a dead per-second Redis sends only per-second limits to their failure
// policy. Two real redis-servers, a real `sluice serve`, real gRPC.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient, type WireDescriptor, type WireResponse } from "../helpers/grpc-client.js";
import { parseMetrics, sampleValue } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { windowBaseKey } from "../helpers/window-key.js";
import { isSummaryKey } from "../../src/insight/windows.js";

const RULES = `
domain: ps
descriptors:
  - key: sec
    failure_mode: deny
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: min
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: both
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: 100}
`;

let main: RedisProcess;
let perSecond: RedisProcess;
let sluice: SluiceProcess;
let client: RlsClient;

beforeAll(async () => {
  [main, perSecond] = await Promise.all([startRedis(), startRedis()]);
  const dir = ruleDir({ "ps.yaml": RULES });
  // A generous store timeout: this checks exact counts, not latency, on a busy host.
  sluice = await startSluice(["--config", dir, "--redis", main.url, "--redis-per-second", perSecond.url], { SLUICE_STORE_TIMEOUT_MS: "1000" });
  client = rlsClient(sluice.port);
});

afterAll(async () => {
  client?.close();
  if (sluice) expect(await sluice.stop()).toBe(0);
  await Promise.all([main?.stop(), perSecond?.stop()]);
});

const call = (...descriptors: WireDescriptor[]): Promise<WireResponse> => client.shouldRateLimit({ domain: "ps", descriptors });

/** Every key of a server with its value: exact contents (a fixed window's key named by its limit, whichever window). */
async function contents(r: RedisProcess): Promise<Record<string, string>> {
  // Refusal summaries (docs/top.md) are flushed within a second of a refusal: not counters, left out.
  const keys = (await r.cli("--scan")).split("\n").filter((k) => k !== "" && !isSummaryKey(k));
  const out: Record<string, string> = {};
  for (const k of keys.sort()) out[windowBaseKey(k)] = (await r.cli("GET", k)).trim();
  return out;
}

const redisSecond = async (r: RedisProcess) => Number((await r.cli("TIME")).trim().split("\n")[0]);

/**
 * Runs `body` (with a fresh value suffix each attempt) until one run stays inside one second of Redis's
 * clock: per-second keys expire at the end of their second, so a run across a boundary proves nothing.
 */
async function inOneSecond<T>(body: (suffix: string) => Promise<T>): Promise<T> {
  for (let attempt = 0; attempt < 10; attempt++) {
    await Promise.all([main.cli("FLUSHALL"), perSecond.cli("FLUSHALL")]);
    const before = await redisSecond(perSecond);
    const result = await body(`-${attempt}`);
    if ((await redisSecond(perSecond)) === before) return result;
  }
  throw new Error("no run stayed within one second in 10 attempts");
}

async function metrics(): Promise<ReturnType<typeof parseMetrics>> {
  const res = await fetch(`http://127.0.0.1:${sluice.adminPort}/metrics`);
  return parseMetrics(await res.text());
}

const mainNode = () => `127.0.0.1:${main.port}`;
const perSecondNode = () => `per_second/127.0.0.1:${perSecond.port}`;

describe("--redis-per-second", () => {
  it("per-second limits count in the per-second Redis, the others in the main one; one call per store", async () => {
    const before = await metrics();
    const calls = (s: typeof before, node: string) => sampleValue(s, "sluice_store_call_duration_seconds_count", { node }) ?? 0;
    const { answer, mainKeys, perSecondKeys, n } = await inOneSecond(async (n) => {
      const answer = await call(descriptor({ sec: `a${n}` }), descriptor({ min: `b${n}` }), descriptor({ both: `c${n}` }));
      return { answer, mainKeys: await contents(main), perSecondKeys: await contents(perSecond), n };
    });
    expect(answer.overall_code).toBe(OK);
    expect(answer.statuses.map((s) => s.limit_remaining)).toEqual([4, 99, 1]);
    expect(mainKeys).toEqual({ [`sluice:{ps:both=c${n}}:fw60`]: "1", [`sluice:{ps:min=b${n}}:fw60`]: "1" });
    expect(perSecondKeys).toEqual({ [`sluice:{ps:both=c${n}}:fw1`]: "1", [`sluice:{ps:sec=a${n}}:fw1`]: "1" });
    // Each attempt made exactly one script call to each store.
    const after = await metrics();
    const attempts = Number(n.slice(1)) + 1;
    expect([calls(after, mainNode()) - calls(before, mainNode()), calls(after, perSecondNode()) - calls(before, perSecondNode())]).toEqual([
      attempts,
      attempts,
    ]);
  });

  it("a request the per-second store refuses takes nothing from the per-minute store", async () => {
    const { answers, mainKeys, perSecondKeys, n } = await inOneSecond(async (n) => {
      const answers: number[] = [];
      for (let i = 0; i < 3; i++) answers.push((await call(descriptor({ both: `r${n}` }))).overall_code);
      // More hits than the per-second limit holds: refused there whatever the count, with a minute limit elsewhere.
      answers.push((await call(descriptor({ min: `m${n}` }), descriptor({ sec: `s${n}` }, { hits_addend: { value: 6 } }))).overall_code);
      return { answers, mainKeys: await contents(main), perSecondKeys: await contents(perSecond), n };
    });
    expect(answers).toEqual([OK, OK, OVER_LIMIT, OVER_LIMIT]);
    // The third request's minute hit and the fourth's were given back: only the two passing requests count.
    expect(mainKeys).toEqual({ [`sluice:{ps:both=r${n}}:fw60`]: "2", [`sluice:{ps:min=m${n}}:fw60`]: "0" });
    expect(perSecondKeys).toEqual({ [`sluice:{ps:both=r${n}}:fw1`]: "2" });
  });

  it("shows both stores' nodes in /readyz and metrics", async () => {
    const ready = await (await fetch(`http://127.0.0.1:${sluice.adminPort}/readyz`)).json();
    expect(ready.store).toEqual({
      kind: "redis+per_second:redis",
      nodes: [
        { id: mainNode(), state: "up", inFlight: 0, scripts: "function", permissions: { state: "ok" } },
        { id: perSecondNode(), state: "up", inFlight: 0, scripts: "function", permissions: { state: "ok" } },
      ],
    });
    const m = await metrics();
    expect([sampleValue(m, "sluice_store_node_up", { node: mainNode() }), sampleValue(m, "sluice_store_node_up", { node: perSecondNode() })]).toEqual([1, 1]);
  });

  // Last: it kills the per-second Redis.
  it("a dead per-second Redis sends only per-second limits to their failure policy", async () => {
    await main.cli("FLUSHALL");
    perSecond.kill("SIGKILL");
    await new Promise((r) => perSecond.proc.once("exit", r));
    const sec = await call(descriptor({ sec: "down" })); // failure_mode: deny
    const min = await call(descriptor({ min: "up" }));
    const both = await call(descriptor({ both: "half" })); // its per-second limit fails open (allow)
    expect([sec.overall_code, min.overall_code, both.overall_code]).toEqual([OVER_LIMIT, OK, OK]);
    expect(min.statuses[0].limit_remaining).toBe(99);
    // The minute limits still count in the main Redis, exactly.
    const keys = await contents(main);
    expect(Object.keys(keys).length).toBe(2);
    expect(Object.values(keys)).toEqual(["1", "1"]);
    expect(
      Object.keys(keys)
        .sort()
        .map((k) => k.replace(/^sluice:\{ps:(\w+)=.*$/, "$1")),
    ).toEqual(["both", "min"]);
    const ready = await (await fetch(`http://127.0.0.1:${sluice.adminPort}/readyz`)).json();
    expect(ready.store.nodes.map((n: { id: string; state: string }) => [n.id, n.state === "up"])).toEqual([
      [mainNode(), true],
      [perSecondNode(), false],
    ]);
  });
});

describe("REDIS_PERSECOND=true (the reference's variables)", () => {
  it("builds the same two stores", async () => {
    const ps = await startRedis();
    const dir = ruleDir({ "ps.yaml": RULES });
    const ref = await startSluice(["--config", dir], {
      REDIS_SOCKET_TYPE: "tcp",
      REDIS_URL: `127.0.0.1:${main.port}`,
      REDIS_PERSECOND: "true",
      REDIS_PERSECOND_SOCKET_TYPE: "tcp",
      REDIS_PERSECOND_URL: `127.0.0.1:${ps.port}`,
      SLUICE_STORE_TIMEOUT_MS: "1000",
    });
    try {
      const line = await ref.waitForLog((l) => l.msg === "listening");
      expect(line.store).toBe("redis, per-second limits: redis");
      const c = rlsClient(ref.port);
      try {
        await main.cli("FLUSHALL");
        expect((await c.shouldRateLimit({ domain: "ps", descriptors: [descriptor({ min: "ref" })] })).overall_code).toBe(OK);
        // The reference's environment: its own key for a fixed window (SLUICE_REFERENCE_KEYS), the minute's start at the end.
        const minute = Math.floor(Number((await main.cli("TIME")).split("\n")[0]) / 60) * 60;
        expect(await contents(main)).toEqual({ [`ps_min_ref_${minute}`]: "1" });
        expect(await contents(ps)).toEqual({});
      } finally {
        c.close();
      }
    } finally {
      expect(await ref.stop()).toBe(0);
      await ps.stop();
    }
  });
});
