// Redis Cluster failover under steady load: a real 3 masters + 3 replicas cluster (cluster-node-timeout
// 1000), `sluice serve --redis-cluster` with the shipped store timeout (50 ms), and this process calling at
// about 300 calls/s over 18 keys (1,000/hour each, failure_mode deny: an OK is the store's decision, an
// OVER_LIMIT the policy's). A master is killed (SIGKILL), then another hung (SIGSTOP), first without full
// coverage and then with it. Each episode shows: the master's keys are decided by the store again at most
// 1 s after its replica says role:master; every counter holds exactly the calls the store decided; the
// other masters' keys are never answered by policy (with full coverage: only while Redis itself refuses,
// cluster_state:fail); no answer slower than 100 ms and p99 at most 60 ms, measured here (the client).
// One cluster serves every episode: the failed master rejoins as a replica between them.
//
// On a busy host (every core taken by other work) the kernel can keep a healthy master waiting for a CPU past the
// 50 ms store timeout, or sluice, or this process: what is measured is bounded by what the host let each do.
// Each process's run-queue wait is sampled (run-queue.ts) and this process's own stalls watched: a policy answer
// on a live master's key is its own, only where the host kept that master waiting for the store timeout around
// it; latency is asserted on the answers during which no process on their path waited long for a CPU; a count
// may exceed the store's decisions by the calls that failed on a live master (a call that timed out ran late).
import keySlot from "cluster-key-slot";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { redisClock, roomInWindow } from "../helpers/minute.js";
import { scrape } from "../helpers/prom.js";
import { replicasOf, slotRanges, startRedisCluster, waitForClusterOk, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { type RunQueueWatch, watchRunQueue } from "../helpers/run-queue.js";
import { type StallWatch, watchStalls } from "../helpers/stalls.js";
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
/** The shipped store timeout (sluice runs with default settings). */
const STORE_TIMEOUT_MS = 50;
/** A gap in this process's 5 ms ticker longer than this is its own stall, not sluice's. */
const CLIENT_STALL_MS = 20;
/** sluice or a data node waiting this long for a CPU during an answer: its latency is the host's too. */
const HELD_MS = 20;
/**
 * A master the host kept waiting for the store timeout fails the calls it holds, those made while it is
 * silent, and (three timeouts of silence) those of its open circuit until the next probe (250 ms): policy
 * answers up to this long after the wait are its own.
 */
const HELD_EFFECT_MS = 3 * STORE_TIMEOUT_MS + 250;
/** No answer may take longer, less what the host took from its path (the deadline's own cap is 1 s). */
const HELD_MAX_MS = 1000;

const EPISODE = { timeout: 60_000 };
/** Seconds of the hour the file needs left: its counts are this hour's keys. */
const ROOM_S = 150;
/** The setup's timeout: a minute, and the wait for the next hour. */
const SETUP_MS = 60_000 + ROOM_S * 1000;

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
  // The counts hold within one hour: in its last 150 s this waits for the next (the hook's timeout covers it).
  await roomInWindow(3600, ROOM_S, redisClock(cluster.nodes[0]));
  // A second of the same load first: the first episode should not also measure a cold process. Every answer is
  // the store's, but where the host kept the key's master from running for the store timeout.
  const own = await owners();
  const runQueue = watchRunQueue(pids(), { allThreads: [sluice.proc.pid!] });
  const warm = load();
  await sleep(1000);
  const answers = await warm.stop();
  await sleep(HELD_EFFECT_MS); // a wait still going on is sampled once it ends
  runQueue.stop();
  const unexplained = answers.filter((a) => !a.ok && !masterHeld(runQueue, own.get(a.key)!, a));
  expect(unexplained.length, `unexplained: ${JSON.stringify(unexplained)}`).toBe(0);
}, SETUP_MS);

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

/** sluice's and every live data node's process ids (as they are now: a restarted node has a new one). */
const pids = () => [sluice.proc.pid!, ...cluster.nodes.filter((_, i) => alive(i)).map((n) => n.proc.pid!)];

/**
 * The host kept master `node` waiting for a CPU for the store timeout (within twice that) during answer `a` or
 * shortly before it.
 */
const masterHeld = (rq: RunQueueWatch, node: number, a: Answer) =>
  rq.waitedMs(cluster.nodes[node].proc.pid!, 2 * STORE_TIMEOUT_MS, a.at - HELD_EFFECT_MS, a.at + a.ms) >= STORE_TIMEOUT_MS;

/** This process stalled, or sluice or the master serving the key waited for a CPU, during answer `a`. */
const pathHeld = (rq: RunQueueWatch, stalls: StallWatch, node: number, a: Answer) =>
  stalls.overlaps(a.at, a.at + a.ms) ||
  rq.waitedDuring(sluice.proc.pid!, a.at, a.at + a.ms) >= HELD_MS ||
  rq.waitedDuring(cluster.nodes[node].proc.pid!, a.at, a.at + a.ms) >= HELD_MS;

/** What the host took from answer `a`'s path: this process's stalls in it, sluice's and its master's waits for a CPU. */
const hostTookMs = (rq: RunQueueWatch, stalls: StallWatch, node: number, a: Answer) =>
  stalls.overlapMs(a.at, a.at + a.ms) +
  rq.waitedDuring(sluice.proc.pid!, a.at, a.at + a.ms) +
  rq.waitedDuring(cluster.nodes[node].proc.pid!, a.at, a.at + a.ms);

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

/** A key's counter on a node: 0 while the key does not exist (no call was counted yet). */
async function counter(node: number, k: string): Promise<number> {
  const reply = await ask(node, "GET", storeKey(k)); // String(null) when absent
  return reply === "null" ? 0 : Number(reply);
}

/** Every key's counter, from the master serving it now. */
async function counters(): Promise<Map<string, number>> {
  const own = await owners();
  const out = new Map<string, number>();
  for (const k of KEYS) out.set(k, await counter(own.get(k)!, k));
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
  // Every process's wait for a CPU, from before the load to after its last answer.
  const runQueue = watchRunQueue(pids(), { allThreads: [sluice.proc.pid!] });
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
  const logsAtKill = sluice.logs.length;
  const failedAt = performance.now();
  cluster.nodes[victim].kill(signal);
  episodes++;
  movedSlots += slots;
  // What the replica holds of the failed master's keys when it stops hearing from it (replication is
  // asynchronous: hits the master took in its last moments may not have reached it, and are Redis's to lose).
  // Nothing changes there until the promotion (a second or more away: the node timeout); 250 ms lets it apply
  // what was already on the wire, even on a busy host. Read at once with its role: still a replica.
  await sleep(250);
  await ask(replicas[0], "READONLY");
  const atFailure = await replicaCounts(replicas[0], [...victimKeys]);
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
    () => "a replica to be promoted",
  );
  // The victim's keys decided by the store again: the first OK on one of them after the promotion.
  let backAt = 0;
  await until(
    () => {
      const a = l.answers.find((x) => victimKeys.has(x.key) && x.ok && x.at > failedAt);
      if (a) backAt = a.at + a.ms;
      return a !== undefined;
    },
    10_000,
    () => "the victim's keys to be store-decided",
  ).catch(() => {}); // asserted below, with the report
  await sleep(500);
  const answers = await l.stop();
  await state.stop();
  stalls.stop();
  await sleep(HELD_EFFECT_MS); // a wait still going on is sampled once it ends
  runQueue.stop();

  // Failed calls sluice counted on each other master (not the failed one): timeouts where the host held that master,
  // and with full coverage the cluster's CLUSTERDOWN. A call routed to the failed master would count on its label.
  const errorsAfter = await storeErrors();
  const failedOn = (node: number) => {
    const id = `127.0.0.1:${cluster.nodes[node].port}`;
    return (errorsAfter.get(id) ?? 0) - (errorsBefore.get(id) ?? 0);
  };
  const otherErrors = [...new Set(own.values())].filter((m) => m !== victim).reduce((n, m) => n + failedOn(m), 0);
  const mine = answers.filter((a) => a.at >= failedAt);
  // The master serving a key during the episode: the victim's keys move to the promoted replica.
  const ownerOf = (a: Answer) => (victimKeys.has(a.key) ? (a.at + a.ms > promotedAt ? promoted : victim) : own.get(a.key)!);
  const policyOther = answers.filter((a) => !victimKeys.has(a.key) && !a.ok);
  // With full coverage the other masters refuse (CLUSTERDOWN) while they say cluster_state:fail, as polled here
  // every 20 ms: an answer within 25 ms of that, or in one of this process's stalls next to it, is the cluster's.
  const inFail = (a: Answer) =>
    state.fail.some((f) => a.at + a.ms >= f.from - 25 && a.at <= f.to + 25) ||
    stalls.stalls.some((st) => st.to > a.at && st.from < a.at + a.ms && state.fail.some((f) => st.to >= f.from - 25 && st.from <= f.to + 25));
  // A policy answer on a live master's key that the host does not explain (it kept that master waiting for the
  // store timeout around it), nor with full coverage the cluster's refusal.
  const unexplained = policyOther.filter((a) => !masterHeld(runQueue, own.get(a.key)!, a) && !(fullCoverage && inFail(a)));
  const heldPolicy = policyOther.filter((a) => masterHeld(runQueue, own.get(a.key)!, a));
  const times = mine.map((a) => a.ms);
  const fair = mine.filter((a) => !pathHeld(runQueue, stalls, ownerOf(a), a)).map((a) => a.ms);
  // What the host took from the failover's path after the promotion: sluice's and the promoted replica's waits for
  // a CPU, and this process's stalls (it saw both the promotion and the answer).
  const hostAfterPromotion = backAt
    ? runQueue.waitedDuring(sluice.proc.pid!, promotedAt, backAt) +
      runQueue.waitedDuring(cluster.nodes[promoted].proc.pid!, promotedAt, backAt) +
      stalls.overlapMs(promotedAt, backAt)
    : 0;
  const report = {
    signal,
    fullCoverage,
    promotedMs: Math.round(promotedAt - failedAt),
    backAfterPromotionMs: backAt ? Math.round(backAt - promotedAt) : "never",
    hostAfterPromotionMs: Math.round(hostAfterPromotion),
    victimPolicy: mine.filter((a) => victimKeys.has(a.key) && !a.ok).length,
    victimPolicyP50Ms: Math.round(p50(mine.filter((a) => victimKeys.has(a.key) && !a.ok).map((a) => a.ms))),
    otherPolicy: policyOther.length,
    otherPolicyHostHeld: heldPolicy.length,
    otherPolicyUnexplained: unexplained.length,
    otherFailedCalls: otherErrors,
    otherPolicyOutsideClusterFail: policyOther.filter((a) => !inFail(a)).length,
    clusterFailMs: Math.round(state.fail.reduce((n, f) => n + f.to - f.from, 0)),
    calls: mine.length,
    maxMs: Math.round(Math.max(...times)),
    maxOwnMs: Math.round(Math.max(...mine.map((a) => a.ms - hostTookMs(runQueue, stalls, ownerOf(a), a)))),
    p99Ms: Math.round(p99(times)),
    over100: times.filter((t) => t > MAX_MS).length,
    clientStalls: stalls.stalls.length,
    clientStalledMs: Math.round(stalls.stalledMs()),
    mostSluiceWaitedMs: runQueue.waitedMs(sluice.proc.pid!, MAX_MS),
    mostMasterWaitedMs: Math.max(...others.map((m) => runQueue.waitedMs(cluster.nodes[m].proc.pid!, 2 * STORE_TIMEOUT_MS))),
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

  const why = JSON.stringify(report);
  expect(backAt, why).toBeGreaterThan(0);
  // sluice's own measure of this failover (sluice_store_failover_seconds): from its first trouble with the failed
  // master (a hold of it by the host just before the kill may have come first) to its first store-decided answer
  // on those slots, which this process saw at backAt.
  const measured = decidedAgain(logsAtKill).find((l) => l.store === `127.0.0.1:${cluster.nodes[promoted].port}`);
  expect(measured, why).toBeDefined();
  expect(measured!.ms, why).toBeLessThanOrEqual(backAt - failedAt + HELD_EFFECT_MS);
  // The victim's keys store-decided within 1 s of the promotion, beyond what the host took from the path.
  expect(backAt - promotedAt - hostAfterPromotion, why).toBeLessThanOrEqual(BACK_AFTER_PROMOTION_MS);
  // Every failed call on another master was answered by policy; the policy answered no other call of theirs but
  // those the host explains (calls not sent to a master silent for the store timeout): never one sent to the
  // failed master (it would count on the failed master's label, and be a policy answer here).
  expect(policyOther.length, why).toBeGreaterThanOrEqual(otherErrors);
  expect(policyOther.length - heldPolicy.length, why).toBeLessThanOrEqual(otherErrors);
  // None at all (with full coverage: none outside the cluster's own CLUSTERDOWN window) but where the host kept
  // the key's master waiting for the store timeout.
  const listed = unexplained.map((a) => ({ key: a.key, at: Math.round(a.at - failedAt), ms: Math.round(a.ms) }));
  expect(unexplained.length, `${why} unexplained: ${JSON.stringify(listed)}`).toBe(0);
  // MAX_MS and P99_MS on every answer whose path the host let run; the others only must not hang.
  expect(fair.length, why).toBeGreaterThan(0);
  expect(report.fairMaxMs, why).toBeLessThanOrEqual(MAX_MS);
  expect(report.fairP99Ms, why).toBeLessThanOrEqual(P99_MS);
  expect(report.maxOwnMs, why).toBeLessThanOrEqual(HELD_MAX_MS);
  // Exact on every key: the count before plus the answers the store decided since.
  const after = await counters();
  // The failed master's keys: what the replica held at the failure plus the calls decided since (by the promoted
  // replica). Another master's: its count before plus every call it decided. A call a live master failed (it
  // timed out: the host held that master) may have run there late: at most one more per failed call.
  for (const k of KEYS) {
    const victims = victimKeys.has(k);
    const decided = victims
      ? atFailure.get(k)! + answers.filter((a) => a.key === k && a.ok && a.at > failedAt).length
      : before.get(k)! + answers.filter((a) => a.key === k && a.ok).length;
    const slack = failedOn(victims ? promoted : own.get(k)!);
    const n = after.get(k)!;
    const where = victims ? "the failed master's" : "another master's";
    expect(`${where} ${k}: ${n >= decided && n <= decided + slack ? "exact" : `${n}, decided ${decided}${slack ? ` + up to ${slack}` : ""}`}`).toBe(
      `${where} ${k}: exact`,
    );
  }
}

/** sluice's "cluster slots store-decided again" log lines (one per failover it measured) from the `from`-th line on. */
function decidedAgain(from = 0): { store: string; ms: number }[] {
  return sluice.logs
    .slice(from)
    .filter((l) => l.includes('"cluster slots store-decided again"'))
    .map((l) => JSON.parse(l));
}

/** The keys' counters on a replica, read before its promotion (it still says so after the last read). */
async function replicaCounts(node: number, keys: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const k of keys) out.set(k, await counter(node, k));
  expect(/role:slave/.test(await ask(node, "INFO", "replication"))).toBe(true);
  return out;
}

async function setFullCoverage(on: boolean) {
  // A node restarted by the last episode may still have its kept connection reconnecting (a command then fails
  // at once, maxRetriesPerRequest 0): asked again until it answers.
  for (let i = 0; i < cluster.nodes.length; i++) {
    await until(
      async () => (await ask(i, "CONFIG", "SET", "cluster-require-full-coverage", on ? "yes" : "no")) === "OK",
      10_000,
      () => `node ${i} to take cluster-require-full-coverage`,
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
  // Redis pauses writes on the old master from the replica's request until the new configuration reaches it
  // (then it answers MOVED): 11-46 ms measured on a quiet 2-core host, longer where the nodes wait for a CPU. A
  // pause past the store timeout fails that master's calls by policy, as a hung master's would, until sluice has
  // the new map. So the test times the pause itself, with writes of its own on a key in the old master's slots.
  it(
    "MOVED is followed: policy answers only on the old master's keys and only where Redis paused writes past the store timeout, every count exact",
    EPISODE,
    async () => {
      await waitForClusterOk(cluster);
      const before = await counters();
      const own = await owners();
      const master = own.get(KEYS[0])!;
      const replica = (await replicasOf(cluster, master))[0];
      const slots = (await slotRanges(cluster)).filter((r) => r.node === master).reduce((n, r) => n + r.to - r.from + 1, 0);
      const runQueue = watchRunQueue(pids(), { allThreads: [sluice.proc.pid!] });
      const stalls = watchStalls(CLIENT_STALL_MS);
      const l = load();
      const pause = watchWritePause(master, `pause-probe{fo:k=${KEYS[0]}}`);
      await sleep(300);
      const failoverAt = performance.now();
      await ask(replica, "CLUSTER", "FAILOVER");
      movedSlots += slots;
      await until(
        async () => /role:master/.test(await ask(replica, "INFO", "replication")),
        10_000,
        () => "the replica to take over",
      );
      // Calls on the old master's keys reach the new one (MOVED, or the refreshed map).
      const promotedAt = performance.now();
      await until(
        () => l.answers.some((a) => a.at > promotedAt && own.get(a.key) === master && a.ok),
        5_000,
        () => "a call on the new master",
      );
      await sleep(300);
      const answers = await l.stop();
      const held = await pause.stop(stalls);
      await sleep(HELD_EFFECT_MS); // a wait still going on is sampled once it ends
      runQueue.stop();
      stalls.stop();
      const refused = answers.filter((a) => !a.ok);
      // Redis's pause is the failover's: a call on the old master's keys answered by policy is explained where
      // writes were held about as long as the store timeout (the probe writes every 2 ms), and only until sluice
      // is back on the store for them: within BACK_AFTER_PROMOTION_MS of the pause's end.
      const pausedPastTimeout = held.longestMs >= STORE_TIMEOUT_MS - PROBE_EVERY_MS;
      const byPause = (a: Answer) => pausedPastTimeout && own.get(a.key) === master && a.at >= failoverAt && a.at <= held.endAt + BACK_AFTER_PROMOTION_MS;
      // Elsewhere, the host's doing only: the nodes on the failover's path waited the store timeout for a CPU in all
      // since the request, or one master alone as long around the call.
      const path = [...new Set([...own.values(), replica])];
      const pathWaited = (a: Answer) => path.reduce((n, i) => n + runQueue.waitedDuring(cluster.nodes[i].proc.pid!, failoverAt, a.at + a.ms), 0);
      const byHost = (a: Answer) => pathWaited(a) >= STORE_TIMEOUT_MS || path.some((i) => masterHeld(runQueue, i, a));
      const unexplained = refused.filter((a) => !byPause(a) && !byHost(a));
      console.log(
        `manual failover: writes held ${Math.round(held.longestMs)} ms, ${answers.length} calls, slowest ${Math.round(Math.max(...answers.map((a) => a.ms)))} ms, ` +
          `${refused.length} by policy (${refused.filter(byPause).length} in the pause, ${refused.filter((a) => !byPause(a) && byHost(a)).length} where the host held a node)`,
      );
      const listed = unexplained.map((a) => ({
        key: a.key,
        oldMaster: own.get(a.key) === master,
        at: Math.round(a.at - failoverAt),
        ms: Math.round(a.ms),
        pathWaited: pathWaited(a),
      }));
      expect(
        unexplained.length,
        `unexplained (writes held ${Math.round(held.longestMs)} ms, until ${Math.round(held.endAt - failoverAt)}): ${JSON.stringify(listed)}`,
      ).toBe(0);
      // The count before plus the store's OKs; a call the policy answered (it timed out) may have run late: one more
      // at most for each.
      const after = await counters();
      for (const k of KEYS) {
        const decided = before.get(k)! + answers.filter((a) => a.key === k && a.ok).length;
        const slack = refused.filter((a) => a.key === k).length;
        const n = after.get(k)!;
        expect(`${k}: ${n >= decided && n <= decided + slack ? "exact" : `${n}, decided ${decided}${slack ? ` + up to ${slack}` : ""}`}`).toBe(`${k}: exact`);
      }
      await waitForClusterOk(cluster);
    },
  );
});

/** How often the pause probe writes. */
const PROBE_EVERY_MS = 2;

/**
 * Writes (SET with a minute's TTL) on `key` straight to `node` every PROBE_EVERY_MS until stop(): the longest
 * any of them waited, less this process's own stalls in it, and when the first MOVED came back (the node let go
 * of the slot: the pause is over).
 */
function watchWritePause(node: number, key: string) {
  const c = new Redis({ port: cluster.nodes[node].port, host: "127.0.0.1", maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on("error", () => {});
  const writes: { at: number; ms: number; moved: boolean }[] = [];
  const pending = new Set<Promise<void>>();
  const timer = setInterval(() => {
    const at = performance.now();
    const p = c.set(key, "1", "PX", 60_000).then(
      () => void writes.push({ at, ms: performance.now() - at, moved: false }),
      (err: Error) => void writes.push({ at, ms: performance.now() - at, moved: /^MOVED/.test(err.message) }),
    );
    pending.add(p);
    void p.finally(() => pending.delete(p));
  }, PROBE_EVERY_MS);
  return {
    async stop(stalls: StallWatch) {
      clearInterval(timer);
      await Promise.all(pending);
      c.disconnect();
      const longestMs = Math.max(0, ...writes.map((w) => w.ms - stalls.overlapMs(w.at, w.at + w.ms)));
      const firstMoved = writes.filter((w) => w.moved).reduce((t, w) => Math.min(t, w.at + w.ms), Infinity);
      return { longestMs, endAt: Number.isFinite(firstMoved) ? firstMoved : performance.now() };
    },
  };
}

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
    // One per episode (each checked there against what this process saw), and one more for each live master the
    // host kept silent until its circuit opened: that one ends with the store's next answer on its slots, which may
    // be the next episode's first call. The histogram holds what the log lines say.
    const logged = decidedAgain();
    expect(logged.length).toBeGreaterThanOrEqual(episodes);
    expect(value("sluice_store_failover_seconds_count")).toBe(logged.length);
    const loggedSeconds = logged.reduce((n, l) => n + l.ms, 0) / 1000;
    expect(Math.abs(value("sluice_store_failover_seconds_sum")! - loggedSeconds)).toBeLessThanOrEqual(logged.length * 0.001);
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
