// Redis Sentinel: sluice follows the master the sentinels name. Real processes: a master, two replicas and
// three sentinels (redis-server --sentinel, quorum 2), passwords on both, and `sluice serve --redis-sentinel`.
// The cases run in order on one deployment. The master is killed: the failure policy answers while the
// sentinels fail over, then sluice counts on the promoted replica, which holds the hits counted before the
// kill (replicated) plus those after. Then a manual failover demotes a master that stays up: sluice leaves
// it when the sentinels switch, not when the old master is reconfigured (seconds later), so no count lands
// where it would be lost. Then a master hangs with its connection open: the policy answers until the
// switch, then sluice drops the silent connection. Last: close() releases every connection, and a sluice
// whose sentinels are all away still starts and answers by policy.
// Times are sluice's: what the host took from the path (this process's stalls, the waits for a CPU of sluice and
// of the master it counts on, as the kernel accounts them: run-queue.ts) is not held against the bounds.
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Secret } from "../../src/core/secret.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { parseSentinelSpec, sentinelConnectionOptions } from "../../src/store/redis-sentinel.js";
import { descriptor, OK, OVER_LIMIT, retryAfter, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { freePort } from "../helpers/ports.js";
import { scrape } from "../helpers/prom.js";
import { MASTER_NAME, startSentinelGroup, startStraySentinel, type SentinelGroup, type SentinelProc } from "../helpers/redis-sentinel.js";
import { type RunQueueWatch, watchRunQueue } from "../helpers/run-queue.js";
import { ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { watchStalls } from "../helpers/stalls.js";
import { sleep, until } from "../helpers/wait.js";
import { windowKey } from "../helpers/window-key.js";

const RULES = `
domain: sn
descriptors:
  # Fails closed: while no master answers, the policy refuses (a real refusal is 1000 hits away).
  - key: login
    failure_mode: deny
    rate_limit: {unit: hour, requests_per_unit: 1000}
`;
// This hour's key (a test that crossed the hour would fail on the count anyway).
const key = (user: string) => windowKey(`sluice:{sn:login=${user}}:fw3600`, 3600, Date.now());
const MASTER_PASSWORD = "master-secret-7c1e";
const SENTINEL_PASSWORD = "sentinel-secret-93ad";
/** Larger than the default: a reply that comes is counted, so every policy answer is one Redis never ran. */
const STORE_TIMEOUT_MS = 500;
/** No single answer may take longer, failover or not (generous: a hang would hit the 10 s gRPC deadline). */
const ANSWER_BOUND_MS = 2000;
/** A hung master is left when the sentinels switch: counted on the new one within this. */
const SWITCH_FOLLOW_MS = 200;
/** Waiting on an event of the deployment (a log line, a replica's acknowledgement): generous, the host is busy. */
const EVENT_MS = 20_000;

let group: SentinelGroup;
let sluice: SluiceProcess;
let client: RlsClient;

beforeAll(async () => {
  group = await startSentinelGroup({ password: MASTER_PASSWORD, sentinelPassword: SENTINEL_PASSWORD, replicas: 2 });
  sluice = await startSluice(["--config", ruleDir({ "sn.yaml": RULES }), "--redis-sentinel", group.spec], {
    SLUICE_REDIS_PASSWORD: MASTER_PASSWORD,
    SLUICE_REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
    SLUICE_STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS),
  });
  client = rlsClient(sluice.port);
});

afterAll(async () => {
  client?.close();
  if (sluice) expect(await sluice.stop()).toBe(0);
  await group?.stop();
});

async function login(user: string) {
  const started = performance.now();
  const answer = await client.shouldRateLimit({ domain: "sn", descriptors: [descriptor({ login: user })] });
  return { answer, ms: performance.now() - started };
}

async function readyStore() {
  const res = await fetch(`http://127.0.0.1:${sluice.adminPort}/readyz`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { store: unknown }).store;
}

const storeOn = (master: SentinelProc) => ({
  kind: "redis-sentinel",
  nodes: [{ id: `sentinel:${MASTER_NAME}`, state: "up", inFlight: 0, master: `127.0.0.1:${master.port}`, scripts: "function", permissions: { state: "ok" } }],
});

async function policyDenials(): Promise<number> {
  let n = 0;
  for (const s of await scrape(sluice.adminPort)) if (s.name === "sluice_rule_failure_policy_decisions_total" && s.labels.mode === "deny") n += s.value;
  return n;
}

/**
 * Calls until one is counted (OK); every other answer must be the deny policy's, and fast: no answer may take
 * ANSWER_BOUND_MS but for what the host took from it. `pids`: data nodes whose waits for a CPU count as the
 * host's too (sluice's are counted always). Returns when the OK came (countedAt) and what the host took
 * from the path between two moments.
 */
async function untilCounted(user: string, boundMs: number, o: { onDenied?: () => Promise<void>; pids?: number[] } = {}) {
  const started = Date.now();
  const pids = [sluice.proc.pid!, ...(o.pids ?? [])];
  const stalls = watchStalls();
  const runQueue = watchRunQueue(pids, { allThreads: [sluice.proc.pid!] });
  const calls: { at: number; ms: number }[] = [];
  let denied = 0;
  try {
    for (;;) {
      const at = performance.now();
      const { answer, ms } = await login(user);
      calls.push({ at, ms });
      if (answer.overall_code === OK) break;
      expect(answer.overall_code).toBe(OVER_LIMIT);
      expect(retryAfter(answer)).toBe("1");
      if (denied++ === 0) await o.onDenied?.();
      expect(Date.now() - started).toBeLessThan(boundMs);
      await sleep(20);
    }
    await sleep(50); // a wait still going on is sampled once it ends
  } finally {
    stalls.stop();
    runQueue.stop();
  }
  const hostTookMs = (from: number, to: number) => stalls.overlapMs(from, to) + pids.reduce((n, pid) => n + runQueue.waitedDuring(pid, from, to), 0);
  const last = calls.at(-1)!;
  const own = calls.map((c) => c.ms - hostTookMs(c.at, c.at + c.ms));
  expect(Math.max(...own), JSON.stringify(calls.map((c, i) => [Math.round(c.ms), Math.round(own[i])]))).toBeLessThan(ANSWER_BOUND_MS);
  return {
    denied,
    ms: Date.now() - started,
    slowestMs: Math.round(Math.max(...calls.map((c) => c.ms))),
    countedAt: last.at + last.ms,
    hostTookMs,
  };
}

/** The data node the sentinels name as master now (all of them: one may lag behind a failover). */
function currentMaster(): Promise<SentinelProc> {
  return group.agreedMaster();
}

describe("Redis Sentinel failover", () => {
  it("master killed: answers by policy while it is away, then counts on the promoted replica", async () => {
    const [master, ...replicas] = group.redis;
    await sluice.waitForLog((l) => l.msg === "rate-limit store up" && l.master === `127.0.0.1:${master.port}`, EVENT_MS);
    expect(await readyStore()).toEqual(storeOn(master));
    // The counts before and after the kill must land in one hour window.
    await roomInWindow(3600, 40, redisClock(master));

    for (let i = 0; i < 5; i++) expect((await login("alice")).answer.overall_code).toBe(OK);
    expect((await master.cli("GET", key("alice"))).trim()).toBe("5");
    // Replicated before the kill: both replicas acknowledged every write so far.
    expect((await master.cli("WAIT", "2", String(EVENT_MS))).trim()).toBe("2");
    for (const r of replicas) expect((await r.cli("GET", key("alice"))).trim()).toBe("5");
    expect(await policyDenials()).toBe(0);

    await master.kill();
    const failover = await untilCounted("alice", 30_000, {
      onDenied: async () => {
        // /readyz names the master sluice lost, not yet a successor, and says it is not up.
        const store = (await readyStore()) as { nodes: { state: string; master: string }[] };
        expect(store.nodes[0].master).toBe(`127.0.0.1:${master.port}`);
        expect(["down", "circuit_open"]).toContain(store.nodes[0].state);
      },
      pids: replicas.map((r) => r.proc.pid!),
    });
    // Down-after is 1 s: there was a failover to wait for, and the policy answered it.
    expect(failover.denied).toBeGreaterThan(0);
    expect(await policyDenials()).toBe(failover.denied);

    // The sentinels promoted a replica; sluice's counted hits after the kill went there.
    const promoted = await currentMaster();
    expect(replicas).toContain(promoted);
    await group.waitForMaster(promoted.port);
    for (let i = 0; i < 3; i++) expect((await login("alice")).answer.overall_code).toBe(OK);
    expect((await promoted.cli("GET", key("alice"))).trim()).toBe(String(5 + 1 + 3));
    expect(await policyDenials()).toBe(failover.denied);
    await sluice.waitForLog((l) => l.msg === "rate-limit store up" && l.master === `127.0.0.1:${promoted.port}`, EVENT_MS);
    expect(await readyStore()).toEqual(storeOn(promoted));
    console.log(`kill: ${failover.denied} policy answers over ${failover.ms} ms, slowest answer ${failover.slowestMs} ms`);
  }, 90_000);

  it("manual failover: leaves the demoted master (still up) as soon as the sentinels switch", async () => {
    const old = await currentMaster();
    const next = group.redis.find((r) => r !== old && r.proc.exitCode === null && r.proc.signalCode === null)!;
    // The sentinels point the other replica at the promoted master during the failover, or when they next
    // look if the failover timed out first (a busy host): made so here either way (a no-op if already so).
    await next.cli("REPLICAOF", "127.0.0.1", String(old.port));
    await group.waitForReplica(next.port, old.port);
    await roomInWindow(3600, 30, redisClock(old));
    for (let i = 0; i < 4; i++) expect((await login("bob")).answer.overall_code).toBe(OK);
    expect((await old.cli("WAIT", "1", String(EVENT_MS))).trim()).toBe("1");
    expect((await next.cli("GET", key("bob"))).trim()).toBe("4");
    const deniedBefore = await policyDenials();

    // No calls while the sentinels switch: between the promotion and the switch both nodes are masters and
    // a count on the old one would be lost (Sentinel's own window, not sluice's).
    await until(async () => /^OK/.test(await group.sentinels[0].cli("SENTINEL", "FAILOVER", MASTER_NAME)), 20_000, "the sentinels to accept a failover", 50);
    await group.waitForMaster(next.port);
    expect(/role:master/.test(await old.cli("INFO", "replication"))).toBe(true); // still up, not yet demoted
    // Sentinel reconfigures the old master about 10 s later; sluice hears +switch-master and moves at once.
    const moved = await untilCounted("bob", 5000, { pids: [next.proc.pid!] });
    for (let i = 0; i < 2; i++) expect((await login("bob")).answer.overall_code).toBe(OK);
    // Every counted hit since the switch landed on the new master.
    expect((await next.cli("GET", key("bob"))).trim()).toBe(String(4 + 1 + 2));
    expect(await policyDenials()).toBe(deniedBefore + moved.denied);
    expect(await readyStore()).toEqual(storeOn(next));
    console.log(`manual: moved ${moved.ms} ms after the switch, ${moved.denied} policy answers`);
  }, 90_000);

  it("master hung (SIGSTOP, its connection stays open): answers by policy, then leaves it for the promoted replica", async () => {
    const hung = await currentMaster();
    const next = group.redis.find((r) => r !== hung && r.proc.exitCode === null && r.proc.signalCode === null)!;
    // Sentinel would make the demoted master a replica of the new one about 10 s after the switch; do it now.
    await next.cli("REPLICAOF", "127.0.0.1", String(hung.port));
    await group.waitForReplica(next.port, hung.port);
    await roomInWindow(3600, 30, redisClock(hung));
    for (let i = 0; i < 3; i++) expect((await login("carol")).answer.overall_code).toBe(OK);
    expect((await hung.cli("WAIT", "1", String(EVENT_MS))).trim()).toBe("1");
    expect((await next.cli("GET", key("carol"))).trim()).toBe("3");
    const deniedBefore = await policyDenials();

    // The sentinels' switch, as their pub/sub announces it: the moment sluice is to follow. Every sentinel is
    // watched, as sluice watches them: the first to announce it may be any of them.
    const watchers = group.sentinels.map((s) => new Redis({ port: s.port, password: SENTINEL_PASSWORD, lazyConnect: true }));
    let switchedAt = 0;
    for (const watcher of watchers) {
      await watcher.connect();
      watcher.on("message", (channel: string, message: string) => {
        if (channel === "+switch-master" && message.startsWith(`${MASTER_NAME} `)) switchedAt ||= performance.now();
      });
      await watcher.subscribe("+switch-master");
    }
    hung.proc.kill("SIGSTOP"); // SIGKILL at the end still ends it
    // Calls to the hung master time out (the store deadline), then its circuit answers at once; at the
    // switch sluice drops the silent connection and counts on the promoted replica.
    const moved = await untilCounted("carol", 30_000, { pids: [next.proc.pid!] });
    const countedAt = moved.countedAt;
    for (const watcher of watchers) watcher.disconnect();
    expect(moved.denied).toBeGreaterThan(0);
    expect(switchedAt).toBeGreaterThan(0);
    // Counted on the new master at most 200 ms after the switch (this loop calls every 20 ms), beyond what the host
    // took from this process, sluice and the new master meanwhile.
    const hostMs = Math.round(moved.hostTookMs(switchedAt, countedAt));
    expect(countedAt - switchedAt - hostMs, `${Math.round(countedAt - switchedAt)} ms, the host's ${hostMs} ms`).toBeLessThanOrEqual(SWITCH_FOLLOW_MS);
    await group.waitForMaster(next.port);
    for (let i = 0; i < 2; i++) expect((await login("carol")).answer.overall_code).toBe(OK);
    expect((await next.cli("GET", key("carol"))).trim()).toBe(String(3 + 1 + 2));
    expect(await policyDenials()).toBe(deniedBefore + moved.denied);
    expect(await readyStore()).toEqual(storeOn(next));

    const logs = sluice.logs.join("\n");
    expect(logs).not.toContain(MASTER_PASSWORD);
    expect(logs).not.toContain(SENTINEL_PASSWORD);
    expect(logs).not.toMatch(/unhandled|uncaught/i);
    console.log(
      `hung: ${moved.denied} policy answers over ${moved.ms} ms, slowest answer ${moved.slowestMs} ms, counted ${Math.round(countedAt - switchedAt)} ms after the switch (the host took ${hostMs} ms of it)`,
    );
  }, 90_000);
});

describe("a Sentinel store in process", () => {
  /** Connections subscribed to something (sluice's +switch-master watchers), summed over the sentinels. */
  async function subscribers(): Promise<number> {
    let n = 0;
    for (const s of group.sentinels) n += (await s.cli("CLIENT", "LIST")).split("\n").filter((l) => / sub=[1-9]/.test(l)).length;
    return n;
  }

  it("reports the master it counts on; close() ends its connection and its watchers on every sentinel", async () => {
    const master = await currentMaster();
    const before = await subscribers();
    const store = new RedisStore({
      servers: [
        sentinelConnectionOptions(parseSentinelSpec(group.spec), { password: new Secret(MASTER_PASSWORD) }, { password: new Secret(SENTINEL_PASSWORD) }),
      ],
      timeoutMs: STORE_TIMEOUT_MS,
      logger: pino({ level: "silent" }),
    });
    await store.start();
    expect(store.name).toBe(`redis-sentinel (${MASTER_NAME})`);
    expect(store.status()).toEqual(storeOn(master));
    await until(async () => (await subscribers()) === before + group.sentinels.length, EVENT_MS, "a watcher on every sentinel", 50);
    await store.close();
    await until(async () => (await subscribers()) === before, EVENT_MS, "the watchers to close", 50);
  });
});

describe("a sentinel that has not heard of the switch", () => {
  // The sentinels learn of a failover one by one (hello messages, every 2 s), and the demoted master stays
  // a master for about 10 s: the lookup after +switch-master may be answered with a server that is up and
  // writable but not the announced master. A stray sentinel, listed second, names such a server every
  // time; sluice is to leave it unused and count only on the announced master.
  it("a master named after a switch other than the announced one is left unused", async () => {
    const own = await startSentinelGroup({ password: MASTER_PASSWORD, sentinelPassword: SENTINEL_PASSWORD, replicas: 1 });
    const stray = await startStraySentinel({ password: MASTER_PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
    const [first, ...others] = own.sentinels.map((s) => `127.0.0.1:${s.port}`);
    const spec = `${MASTER_NAME}@${[first, `127.0.0.1:${stray.sentinel.port}`, ...others].join(",")}`;
    const lone = await startSluice(["--config", ruleDir({ "sn.yaml": RULES }), "--redis-sentinel", spec], {
      SLUICE_REDIS_PASSWORD: MASTER_PASSWORD,
      SLUICE_REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
      SLUICE_STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS),
    });
    const c = rlsClient(lone.port);
    const call = async () => (await c.shouldRateLimit({ domain: "sn", descriptors: [descriptor({ login: "dan" })] })).overall_code;
    try {
      const [old, next] = own.redis;
      await lone.waitForLog((l) => l.msg === "rate-limit store up" && l.master === `127.0.0.1:${old.port}`, EVENT_MS);
      await roomInWindow(3600, 30, redisClock(old));
      for (let i = 0; i < 2; i++) expect(await call()).toBe(OK);
      expect((await old.cli("WAIT", "1", String(EVENT_MS))).trim()).toBe("1");

      await until(async () => /^OK/.test(await own.sentinels[0].cli("SENTINEL", "FAILOVER", MASTER_NAME)), 20_000, "the sentinels to accept a failover", 50);
      await own.waitForMaster(next.port);
      // The lookup after the switch asked the stray sentinel (next in line after the first) and left its answer.
      const left = await lone.waitForLog((l) => l.msg === "a sentinel named another server than the announced master; asking again", EVENT_MS);
      expect(left).toMatchObject({ named: `127.0.0.1:${stray.master.port}`, master: `127.0.0.1:${next.port}` });
      await lone.waitForLog((l) => l.msg === "rate-limit store up" && l.master === `127.0.0.1:${next.port}`, EVENT_MS);
      for (let i = 0; i < 3; i++) expect(await call()).toBe(OK);
      expect((await next.cli("GET", key("dan"))).trim()).toBe("5");
      expect((await stray.master.cli("DBSIZE")).trim()).toBe("0");
    } finally {
      c.close();
      expect(await lone.stop()).toBe(0);
      await stray.stop();
      await own.stop();
    }
  }, 90_000);
});

describe("no sentinel reachable at start", () => {
  it("starts within the connect bound, answers by policy and says why", async () => {
    const spec = `${MASTER_NAME}@127.0.0.1:${await freePort()},127.0.0.1:${await freePort()}`;
    // Its event loop's waits for a CPU, watched from its spawn.
    let runQueue: RunQueueWatch | undefined;
    const lone = await startSluice(
      ["--config", ruleDir({ "sn.yaml": RULES }), "--redis-sentinel", spec],
      {},
      {
        onSpawn: (p) => (runQueue = watchRunQueue([p.pid!])),
      },
    );
    const c = rlsClient(lone.port);
    try {
      // start() waits at most twice the connect timeout (2 s here) for the first lookup: from the rules loaded to
      // listening (sluice's own clock), less the time the host kept its event loop from a CPU meanwhile, 3 s is
      // generous.
      const at = async (msg: string) => Number((await lone.waitForLog((l) => l.msg === msg)).time);
      const [loadedAt, listeningAt] = [await at("rules loaded"), await at("listening")];
      const startMs = listeningAt - loadedAt;
      await sleep(50); // a wait still going on is sampled once it ends
      runQueue!.stop();
      const heldMs = runQueue!.waitedDuring(lone.proc.pid!, loadedAt - performance.timeOrigin, listeningAt - performance.timeOrigin);
      console.log(`start: ${startMs} ms from the rules loaded to listening, ${heldMs} ms waiting for a CPU`);
      expect(startMs - heldMs, `${startMs} ms, ${heldMs} ms of it waiting for a CPU`).toBeLessThan(3000);
      const down = await lone.waitForLog((l) => l.msg === "rate-limit store down");
      expect(down.store).toBe(`sentinel:${MASTER_NAME}`);
      expect(down.reason).toBe("no sentinel answered");
      expect(down.detail).toMatch(/^All sentinels are unreachable\. Retrying from scratch after \d+ms\. Last error: /);
      const answer = await c.shouldRateLimit({ domain: "sn", descriptors: [descriptor({ login: "dave" })] });
      expect(answer.overall_code).toBe(OVER_LIMIT);
      expect(retryAfter(answer)).toBe("1");
      const res = await fetch(`http://127.0.0.1:${lone.adminPort}/readyz`);
      expect(((await res.json()) as { store: unknown }).store).toEqual({
        kind: "redis-sentinel",
        nodes: [{ id: `sentinel:${MASTER_NAME}`, state: "down", inFlight: 0 }],
      });
    } finally {
      runQueue?.stop();
      c.close();
      expect(await lone.stop()).toBe(0);
    }
  });
});

describe("--redis-sentinel usage errors", () => {
  it("exits 2 naming the conflicting flags, or the malformed value", () => {
    const both = runCli(["serve", "--redis", "redis://127.0.0.1:1", "--redis-sentinel", "m@127.0.0.1:2"]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("sluice: --redis and --redis-sentinel cannot be used together: give one Redis store\n");
    const bad = runCli(["serve", "--redis-sentinel", "127.0.0.1:27379"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("sluice: --redis-sentinel takes MASTER@host:port[,host:port...], got '127.0.0.1:27379': no '@' after the master's name\n");
  });
});
