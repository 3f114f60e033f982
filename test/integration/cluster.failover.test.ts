// Redis Cluster failover under steady load: a real 3 masters + 3 replicas cluster (cluster-node-timeout
// 1000), `sluice serve --redis-cluster` with the shipped store timeout (50 ms), and this process calling at
// about 300 calls/s over 18 keys (1,000/hour each, failure_mode deny: an OK is the store's decision, an
// OVER_LIMIT the policy's). A master is killed (SIGKILL), then another hung (SIGSTOP), first without full
// coverage and then with it. Each episode shows: the master's keys are decided by the store again at most
// 1 s after its replica says role:master; every counter holds exactly the calls the store decided; the
// other masters' keys are never answered by policy (with full coverage: only while Redis itself refuses,
// cluster_state:fail); no answer slower than 100 ms and p99 at most 60 ms, measured here (the client).
// One cluster serves every episode: the failed master rejoins as a replica between them.
import keySlot from "cluster-key-slot";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { scrape } from "../helpers/prom.js";
import { replicasOf, slotRanges, startRedisCluster, waitForClusterOk, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { watchStalls } from "../helpers/stalls.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep, until } from "../helpers/wait.js";
import { windowKey } from "../helpers/window-key.js";

const RULES = `
domain: fo
descriptors:
  - key: k
    failure_mode: deny
    rate_limit: {unit: hour, requests_per_unit: 1000}
`;
const KEYS = Array.from({ length: 18 }, (_, i) => `u${i}`);
// This hour's key (a test that crossed the hour would fail on the count anyway).
const storeKey = (k: string) => windowKey(`sluice:{fo:k=${k}}:fw3600`, 3600, Date.now());
/** Calls per 10 ms tick: about 300 calls/s. */
const PER_TICK = 3;
const MAX_MS = 100;
const P99_MS = 60;
const BACK_AFTER_PROMOTION_MS = 1000;
/** A gap in this process's 5 ms ticker longer than this is its own stall, not sluice's. */
const CLIENT_STALL_MS = 20;
/** This process stalled this long in all during an episode: the host was starved (other work on every core). */
const STARVED_MS = 100;
/** On a starved host: no answer may take longer than this (the store deadline's own cap is 1 s). */
const STARVED_MAX_MS = 1000;

/**
 * An episode that failed is run once more (each run checks its own counts: before + store-decided). On a host
 * whose cores are all taken by other work (this process stalled more than STARVED_MS in the episode), a healthy
 * master can miss the 50 ms store timeout, and answers can wait on the host: the latency bounds and the zero
 * policy answers on other masters are then not asserted, only that each such answer was its own master's failed
 * call and that nothing hangs. The report line gives the numbers either way.
 */
const EPISODE = { timeout: 60_000, retry: 1 };

interface Answer {
  key: string;
  at: number;
  ms: number;
  ok: boolean;
}

let cluster: RedisClusterProcess;
let sluice: SluiceProcess;
let client: RlsClient;
/** Slots the failed masters served, over the episodes run: what sluice's map must have moved. */
let movedSlots = 0;
let episodes = 0;

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000, fullCoverage: false });
  sluice = await startSluice(["--config", ruleDir({ "fo.yaml": RULES }), "--redis-cluster", cluster.spec]);
  client = rlsClient(sluice.port);
  await roomInWindow(3600, 150, redisClock(cluster.nodes[0]));
  // A second of the same load first: the first episode should not also measure a cold process.
  const warm = load();
  await sleep(1000);
  expect((await warm.stop()).every((a) => a.ok)).toBe(true);
}, 60_000);

afterAll(async () => {
  client?.close();
  for (const c of conns.values()) c.disconnect();
  if (sluice) await sluice.stop();
  for (const n of cluster?.nodes ?? []) n.kill("SIGCONT");
  await cluster?.stop();
});

/** Polling during an episode goes over kept connections: a redis-cli process per poll stalls this process. */
const conns = new Map<number, Redis>();
function ask(node: number, ...args: string[]): Promise<string> {
  const port = cluster.nodes[node].port;
  let c = conns.get(port);
  if (!c) {
    c = new Redis({ port, host: "127.0.0.1", commandTimeout: 2000, retryStrategy: () => 50, maxRetriesPerRequest: 0 });
    c.on("error", () => {});
    conns.set(port, c);
  }
  return c.call(args[0], ...args.slice(1)).then(String);
}

const alive = (i: number) => cluster.nodes[i].proc.exitCode === null && cluster.nodes[i].proc.signalCode === null;

/** Open-loop load: PER_TICK calls every 10 ms, round robin over KEYS, until stop(). */
function load() {
  const answers: Answer[] = [];
  const pending = new Set<Promise<void>>();
  let n = 0;
  const timer = setInterval(() => {
    for (let i = 0; i < PER_TICK; i++) {
      const key = KEYS[n++ % KEYS.length];
      const at = performance.now();
      const p = client.shouldRateLimit({ domain: "fo", descriptors: [descriptor({ k: key })] }).then((res) => {
        const ok = res.overall_code === OK;
        if (!ok) expect(res.overall_code).toBe(OVER_LIMIT);
        answers.push({ key, at, ms: performance.now() - at, ok });
      });
      pending.add(p);
      p.finally(() => pending.delete(p));
    }
  }, 10);
  return {
    answers,
    async stop() {
      clearInterval(timer);
      await Promise.all(pending);
      return answers;
    },
  };
}

/** The master (node index) serving each key now. */
async function owners(): Promise<Map<string, number>> {
  const ranges = await slotRanges(cluster);
  const out = new Map<string, number>();
  for (const k of KEYS) {
    const slot = keySlot(`{fo:k=${k}}`);
    out.set(k, ranges.find((r) => slot >= r.from && slot <= r.to)!.node);
  }
  return out;
}

/** sluice_store_errors_total by node (host:port). */
async function storeErrors(): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const x of await scrape(sluice.adminPort)) if (x.name === "sluice_store_errors_total") out.set(x.labels.node, x.value);
  return out;
}

/** Every key's counter, from the master serving it now. */
async function counters(): Promise<Map<string, number>> {
  const own = await owners();
  const out = new Map<string, number>();
  for (const k of KEYS) out.set(k, Number(await ask(own.get(k)!, "GET", storeKey(k))));
  return out;
}

function p50(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

function p99(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)];
}

/** Polls CLUSTER INFO on a live node every 20 ms: the intervals in which it said cluster_state:fail. */
function watchClusterState(node: number) {
  const fail: { from: number; to: number }[] = [];
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const t = performance.now();
      const down = /cluster_state:fail/.test(await ask(node, "CLUSTER", "INFO").catch(() => ""));
      const last = fail.at(-1);
      if (down) {
        if (last && last.to < 0) continue;
        fail.push({ from: t, to: -1 });
      } else if (last && last.to < 0) last.to = performance.now();
      await sleep(20);
    }
  })();
  return {
    fail,
    async stop() {
      stopped = true;
      await done;
      for (const f of fail) if (f.to < 0) f.to = performance.now();
    },
  };
}

async function episode(signal: "SIGKILL" | "SIGSTOP", fullCoverage: boolean) {
  await waitForClusterOk(cluster);
  const before = await counters();
  const own = await owners();
  // A master holding some of the keys, with a replica.
  const victim = [...new Set(own.values())].find((m) => alive(m))!;
  const replicas = (await replicasOf(cluster, victim)).filter(alive);
  expect(replicas.length).toBeGreaterThan(0);
  const others = [...new Set(own.values())].filter((m) => m !== victim);
  const victimKeys = new Set(KEYS.filter((k) => own.get(k) === victim));

  const errorsBefore = await storeErrors();
  const l = load();
  await sleep(500);
  // Every other master: each says cluster_state:fail (and answers CLUSTERDOWN) on its own schedule.
  const watchers = others.map(watchClusterState);
  const state = {
    fail: [] as { from: number; to: number }[],
    async stop() {
      for (const w of watchers) await w.stop();
      state.fail = watchers.flatMap((w) => w.fail);
    },
  };
  // This process's own stalls (a busy host): an answer that waited on them here is not sluice's latency.
  const stalls = watchStalls(CLIENT_STALL_MS);
  const slots = (await slotRanges(cluster)).filter((r) => r.node === victim).reduce((n, r) => n + r.to - r.from + 1, 0);
  const failedAt = performance.now();
  cluster.nodes[victim].kill(signal);
  episodes++;
  movedSlots += slots;
  // What the replica holds of the failed master's keys when it stops hearing from it (replication is
  // asynchronous: hits the master took in its last moments may not have reached it, and are Redis's to lose).
  // Nothing changes there until the promotion; 50 ms lets it apply what was already on the wire.
  await sleep(50);
  await ask(replicas[0], "READONLY");
  const atFailure = new Map<string, number>();
  for (const k of victimKeys) atFailure.set(k, Number(await ask(replicas[0], "GET", storeKey(k))));
  let promotedAt = 0;
  let promoted = -1;
  await until(
    async () => {
      for (const r of replicas) {
        if (/role:master/.test(await ask(r, "INFO", "replication"))) {
          promotedAt = performance.now();
          promoted = r;
          return true;
        }
      }
      return false;
    },
    20_000,
    "a replica to be promoted",
    50,
  );
  // The victim's keys decided by the store again: the first OK on one of them after the promotion.
  let backAt = 0;
  await until(
    async () => {
      const a = l.answers.find((x) => victimKeys.has(x.key) && x.ok && x.at > failedAt);
      if (a) backAt = a.at + a.ms;
      return a !== undefined;
    },
    10_000,
    "the victim's keys to be store-decided",
    50,
  ).catch(() => {});
  await sleep(500);
  const answers = await l.stop();
  await state.stop();
  stalls.stop();

  // Failed calls sluice counted on each other master (not the failed one): timeouts of a starved host, and with
  // full coverage the cluster's CLUSTERDOWN. A call routed to the failed master would count on its label instead.
  const errorsAfter = await storeErrors();
  const failedOn = (node: number) => {
    const id = `127.0.0.1:${cluster.nodes[node].port}`;
    return (errorsAfter.get(id) ?? 0) - (errorsBefore.get(id) ?? 0);
  };
  const otherErrors = [...new Set(own.values())].filter((m) => m !== victim).reduce((n, m) => n + failedOn(m), 0);
  const mine = answers.filter((a) => a.at >= failedAt);
  const policyOther = mine.filter((a) => !victimKeys.has(a.key) && !a.ok);
  const inFail = (a: Answer) => state.fail.some((f) => a.at + a.ms >= f.from - 25 && a.at <= f.to + 25);
  const times = mine.map((a) => a.ms);
  const stalled = (a: Answer) => stalls.overlaps(a.at, a.at + a.ms);
  const fair = mine.filter((a) => !stalled(a)).map((a) => a.ms);
  const report = {
    signal,
    fullCoverage,
    promotedMs: Math.round(promotedAt - failedAt),
    backAfterPromotionMs: backAt ? Math.round(backAt - promotedAt) : "never",
    victimPolicy: mine.filter((a) => victimKeys.has(a.key) && !a.ok).length,
    victimPolicyP50Ms: Math.round(p50(mine.filter((a) => victimKeys.has(a.key) && !a.ok).map((a) => a.ms))),
    otherPolicy: policyOther.length,
    otherFailedCalls: otherErrors,
    otherPolicyOutsideClusterFail: policyOther.filter((a) => !inFail(a)).length,
    clusterFailMs: Math.round(state.fail.reduce((s, f) => s + f.to - f.from, 0)),
    calls: mine.length,
    maxMs: Math.round(Math.max(...times)),
    p99Ms: Math.round(p99(times)),
    over100: times.filter((t) => t > MAX_MS).length,
    clientStalls: stalls.stalls.length,
    clientStalledMs: Math.round(stalls.stalledMs()),
    fairCalls: fair.length,
    fairMaxMs: Math.round(Math.max(...fair)),
    fairP99Ms: Math.round(p99(fair)),
  };
  console.log(`failover ${JSON.stringify(report)}`);
  // Let the failed master rejoin (as a replica) for the next episode.
  if (signal === "SIGSTOP") cluster.nodes[victim].kill("SIGCONT");
  else await cluster.nodes[victim].restart();
  await waitForClusterOk(cluster);
  expect(/role:master/.test(await ask(promoted, "INFO", "replication"))).toBe(true);

  const starved = report.clientStalledMs > STARVED_MS;
  expect(backAt).toBeGreaterThan(0);
  expect(backAt - promotedAt).toBeLessThanOrEqual(BACK_AFTER_PROMOTION_MS);
  // Every policy answer on another master's key was a failed call of that master itself, never one sent to the
  // failed master.
  expect(answers.filter((a) => !victimKeys.has(a.key) && !a.ok).length).toBe(otherErrors);
  // None at all (with full coverage: none outside the cluster's own CLUSTERDOWN window), unless this process saw
  // the host starved: then a healthy master can miss the 50 ms deadline, and the line above accounts for it.
  if (!starved) {
    if (fullCoverage) expect(report.otherPolicyOutsideClusterFail).toBe(0);
    else expect(report.otherPolicy).toBe(0);
  }
  // MAX_MS and P99_MS on a host that let this process run; on a starved one only that nothing hangs.
  if (!starved) {
    expect(report.fairMaxMs).toBeLessThanOrEqual(MAX_MS);
    expect(report.fairP99Ms).toBeLessThanOrEqual(P99_MS);
  } else expect(report.fairMaxMs).toBeLessThanOrEqual(STARVED_MAX_MS);
  // Exact on every key: the count before plus the answers the store decided since.
  const after = await counters();
  // The failed master's keys: what the replica held at the failure plus the calls decided since (by the promoted
  // replica). Another master's: its count before plus every call it decided. On a starved host a call a live
  // master answered after the deadline was counted: at most one per failed call of that master.
  for (const k of KEYS) {
    const victims = victimKeys.has(k);
    const decided = victims
      ? atFailure.get(k)! + answers.filter((a) => a.key === k && a.ok && a.at > failedAt).length
      : before.get(k)! + answers.filter((a) => a.key === k && a.ok).length;
    const slack = starved ? failedOn(victims ? promoted : own.get(k)!) : 0;
    const n = after.get(k)!;
    const where = victims ? "the failed master's" : "another master's";
    expect(`${where} ${k}: ${n >= decided && n <= decided + slack ? "exact" : `${n}, decided ${decided}${slack ? ` + up to ${slack}` : ""}`}`).toBe(
      `${where} ${k}: exact`,
    );
  }
}

async function setFullCoverage(on: boolean) {
  // A node restarted by the last episode may still have its kept connection reconnecting (a command then fails
  // at once, maxRetriesPerRequest 0): asked again until it answers.
  for (let i = 0; i < cluster.nodes.length; i++) {
    await until(
      () =>
        ask(i, "CONFIG", "SET", "cluster-require-full-coverage", on ? "yes" : "no").then(
          () => true,
          () => false,
        ),
      5_000,
      `node ${i} to take cluster-require-full-coverage`,
      50,
    );
  }
}

describe("Redis Cluster failover, cluster-require-full-coverage no", () => {
  it("SIGKILL of a master", EPISODE, async () => {
    await episode("SIGKILL", false);
  });
  it("SIGSTOP of a master", EPISODE, async () => {
    await episode("SIGSTOP", false);
  });
});

describe("a manual failover (CLUSTER FAILOVER on a replica)", () => {
  it("MOVED is followed: no policy answer, every count exact", EPISODE, async () => {
    await waitForClusterOk(cluster);
    const before = await counters();
    const own = await owners();
    const master = own.get(KEYS[0])!;
    const replica = (await replicasOf(cluster, master))[0];
    const slots = (await slotRanges(cluster)).filter((r) => r.node === master).reduce((n, r) => n + r.to - r.from + 1, 0);
    const l = load();
    await sleep(300);
    await ask(replica, "CLUSTER", "FAILOVER");
    movedSlots += slots;
    await until(async () => /role:master/.test(await ask(replica, "INFO", "replication")), 10_000, "the replica to take over", 50);
    // Calls on the old master's keys reach the new one (MOVED, or the refreshed map).
    const promotedAt = performance.now();
    await until(async () => l.answers.some((a) => a.at > promotedAt && own.get(a.key) === master && a.ok), 5_000, "a call on the new master", 50);
    await sleep(300);
    const answers = await l.stop();
    console.log(`manual failover: ${answers.length} calls, slowest ${Math.round(Math.max(...answers.map((a) => a.ms)))} ms`);
    expect(answers.filter((a) => !a.ok).length).toBe(0);
    const after = await counters();
    for (const k of KEYS) expect(`${k}=${after.get(k)}`).toBe(`${k}=${before.get(k)! + answers.filter((a) => a.key === k).length}`);
    await waitForClusterOk(cluster);
  });
});

describe("Redis Cluster failover, cluster-require-full-coverage yes", () => {
  it("SIGKILL of a master", EPISODE, async () => {
    await setFullCoverage(true);
    await episode("SIGKILL", true);
  });
  it("SIGSTOP of a master", EPISODE, async () => {
    await setFullCoverage(true);
    await episode("SIGSTOP", true);
  });
  it("metrics count the moves and the failovers; /readyz shows the cluster as it is now", async () => {
    const samples = await scrape(sluice.adminPort);
    const value = (name: string, labels: Record<string, string> = {}) =>
      samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))?.value;
    expect(value("sluice_store_slot_moves_total")).toBe(movedSlots);
    // One per episode (a master stalled three calls in a row by a busy host would add one).
    const failovers = value("sluice_store_failover_seconds_count")!;
    expect(failovers).toBeGreaterThanOrEqual(episodes);
    // Each failover took the cluster's own 2-3 s (node timeout, election) and no more than 1 s beyond.
    expect(value("sluice_store_failover_seconds_sum")! / failovers).toBeLessThan(4);
    expect(value("sluice_store_topology_refreshes_total", { result: "ok" })).toBeGreaterThan(0);

    const lines = (await ask(0, "CLUSTER", "NODES"))
      .trim()
      .split("\n")
      .map((l) => l.split(" "));
    const addr = (f: string[]) => f[1].split("@")[0];
    const byId = new Map(lines.map((f) => [f[0], addr(f)]));
    const slotsOf = (f: string[]) => f.slice(8).reduce((n, r) => n + (r.includes("-") ? Number(r.split("-")[1]) - Number(r.split("-")[0]) + 1 : 1), 0);
    const sorted = <T extends { id: string }>(xs: T[]) => [...xs].sort((a, b) => (a.id < b.id ? -1 : 1));
    const res = await fetch(`http://127.0.0.1:${sluice.adminPort}/readyz`);
    const store = ((await res.json()) as { store: { kind: string; nodes: { id: string }[]; replicas: { id: string }[] } }).store;
    expect(store.kind).toBe("redis-cluster");
    expect(sorted(store.nodes)).toEqual(
      sorted(
        lines
          .filter((f) => f[2].includes("master"))
          .map((f) => ({ id: addr(f), state: "up", inFlight: 0, scripts: "function", permissions: { state: "ok" }, role: "master", slots: slotsOf(f) })),
      ),
    );
    expect(sorted(store.replicas)).toEqual(
      sorted(
        lines
          .filter((f) => f[2].includes("slave"))
          .map((f) => ({
            id: addr(f),
            state: "up",
            inFlight: 0,
            scripts: "function",
            permissions: { state: "ok" },
            role: "replica",
            replicaOf: byId.get(f[3]),
          })),
      ),
    );
  });
});
