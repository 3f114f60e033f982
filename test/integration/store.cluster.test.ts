// RedisClusterStore against a real 3-master Redis Cluster: the Store contract in real time. The
// contract names keys freely; here every key gets one hash tag, as sluice's keys of one descriptor
// share theirs, so each call's keys are in one slot (the cluster refuses a script across slots).
import { pino } from "pino";
import { afterAll, beforeAll } from "vitest";
import { RedisClusterStore } from "../../src/store/redis-cluster.js";
import type { Check, CheckResult, Store, StoreStatus } from "../../src/store/store.js";
import { runStoreContract } from "../contract/store.contract.js";
import { ownerOf, startRedisCluster, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { sleep } from "../helpers/wait.js";

const TAG = "contract";
const PREFIX = `{${TAG}}:`;
/** The cluster store with every key under one hash tag; the rest passes through. */
class OneHashTag implements Store {
  readonly name: string;
  constructor(private readonly inner: RedisClusterStore) {
    this.name = inner.name;
  }
  status(): StoreStatus {
    return this.inner.status();
  }
  groupOf(): number {
    return this.inner.groupOf(TAG);
  }
  apply(_group: number, checks: Check[], dryRun?: boolean): Promise<CheckResult[]> {
    return this.inner.apply(this.groupOf(), checks.map(tagged), dryRun);
  }
  refund(_group: number, checks: Check[], results: CheckResult[]): Promise<void> {
    return this.inner.refund(this.groupOf(), checks.map(tagged), results);
  }
  start(): Promise<void> {
    return this.inner.start();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

function tagged(c: Check): Check {
  return c.algorithm === "quota"
    ? { ...c, key: PREFIX + c.key, periods: { ...c.periods, nextKey: PREFIX + c.periods.nextKey } }
    : { ...c, key: PREFIX + c.key };
}

let cluster: RedisClusterProcess;
let owner: RedisClusterProcess["nodes"][number];
beforeAll(async () => {
  cluster = await startRedisCluster(3);
  owner = cluster.nodes[await ownerOf(cluster, PREFIX)];
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

runStoreContract("redis cluster", async () => {
  await owner.cli("FLUSHALL");
  const inner = new RedisClusterStore({
    startupNodes: cluster.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })),
    timeoutMs: 5000,
    logger: pino({ level: "silent" }),
  });
  const store = new OneHashTag(inner);
  await store.start();
  return {
    store,
    advance: async (ms) => {
      await sleep(ms + 5);
    },
    cleanup: () => store.close(),
    nowMicros: async () => {
      const [s, us] = (await owner.cli("TIME")).trim().split("\n").map(Number);
      return s * 1_000_000 + us;
    },
    keys: async () =>
      (await owner.cli("KEYS", "*"))
        .split("\n")
        .filter((k) => k !== "")
        .map((k) => k.slice(PREFIX.length)),
    pttl: async (key) => Number(await owner.cli("PTTL", PREFIX + key)),
  };
});
