// How the Redis store calls its scripts: on Redis 7+ one function library, loaded once per node and
// called with FCALL; a node that lost it gets it again without a failed call; EVALSHA where FUNCTION is
// not allowed. Reported per node in status() (and so in /readyz).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { storeLibrary } from "../../src/store/lua-library.js";
import { fw, runStoreContract, tb } from "../contract/store.contract.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { sleep } from "../helpers/wait.js";

const silent = pino({ level: "silent" });

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** calls= of one INFO commandstats line ("function|load", "fcall", ...); 0 when absent. */
async function calls(cmd: string): Promise<number> {
  const info = await redis.cli("INFO", "commandstats");
  const line = info.split("\n").find((l) => l.startsWith(`cmdstat_${cmd}:`));
  return Number(/calls=(\d+)/.exec(line ?? "")?.[1] ?? 0);
}

async function libraries(): Promise<string> {
  return redis.cli("FUNCTION", "LIST", "LIBRARYNAME", "sluice_*");
}

describe("Redis 7+: the function library", () => {
  it("is loaded at connect, called with FCALL, and said in status()", async () => {
    await redis.cli("FUNCTION", "FLUSH");
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 2000, logger: silent });
    try {
      await store.start();
      // Counted from here: the connect's own EVAL is the permission check (acl-check.ts).
      await redis.cli("CONFIG", "RESETSTAT");
      expect(store.status().nodes[0].scripts).toBe("function");
      expect(await libraries()).toContain(storeLibrary().name);
      const results = await store.apply(0, [tb("fn:tb", 3, 1), fw("fn:fw", 2)]);
      expect(results.map((r) => [r.allowed, r.remaining])).toEqual([
        [true, 2],
        [true, 1],
      ]);
      expect(await calls("fcall")).toBe(1);
      expect(await calls("evalsha")).toBe(0);
      expect(await calls("eval")).toBe(0);
    } finally {
      await store.close();
    }
  });

  it("lost by the node (FUNCTION FLUSH), is loaded again once and every call answers", async () => {
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 2000, logger: silent });
    try {
      await store.start();
      await redis.cli("FLUSHALL");
      await redis.cli("FUNCTION", "FLUSH");
      await redis.cli("CONFIG", "RESETSTAT");
      // 20 calls at once, all finding the library gone: one load, then each call repeated once.
      const all = await Promise.all(Array.from({ length: 20 }, () => store.apply(0, [fw("fn:flushed", 100)])));
      expect(all.map((r) => r[0].allowed)).toEqual(Array(20).fill(true));
      expect(all.map((r) => r[0].remaining).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => 80 + i));
      expect(await calls("function|load")).toBe(1);
      expect(await calls("fcall")).toBe(40);
      expect(await libraries()).toContain(storeLibrary().name);
      expect(store.status().nodes[0].state).toBe("up");
    } finally {
      await store.close();
    }
  });

  it("is loaded again by a restarted node before the first call", async () => {
    const own = await startRedis();
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: own.port }], timeoutMs: 2000, logger: silent });
    try {
      await store.start();
      await own.restart();
      const deadline = Date.now() + 5000;
      let answered = false;
      while (!answered && Date.now() < deadline) {
        answered = await store.apply(0, [fw("fn:restart", 5)]).then(
          () => true,
          () => false,
        );
        if (!answered) await sleep(50);
      }
      expect(answered).toBe(true);
      expect(store.status().nodes[0].scripts).toBe("function");
      expect(await own.cli("FUNCTION", "LIST", "LIBRARYNAME", "sluice_*")).toContain(storeLibrary().name);
    } finally {
      await store.close();
      await own.stop();
    }
  });
});

// The contract again with the scripts called by EVALSHA (a user that may not run FUNCTION), as on Redis < 7.
runStoreContract("redis (EVALSHA)", async () => {
  await redis.cli("FLUSHALL");
  await redis.cli("ACL", "SETUSER", "contract", "on", ">pw", "~*", "+@all", "-function");
  const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port, username: "contract", password: "pw" }], timeoutMs: 5000, logger: silent });
  await store.start();
  expect(store.status().nodes[0].scripts).toBe("evalsha");
  return {
    store,
    advance: (ms) => sleep(ms + 5),
    cleanup: () => store.close(),
    nowMicros: async () => {
      const [sec, us] = (await redis.cli("TIME")).trim().split("\n").map(Number);
      return sec * 1_000_000 + us;
    },
    keys: async () => (await redis.cli("KEYS", "*")).split("\n").filter((k) => k !== ""),
    pttl: async (key) => Number(await redis.cli("PTTL", key)),
  };
});

describe("EVALSHA", () => {
  it("is chosen at connect where the user may not run FUNCTION, and answers the same", async () => {
    await redis.cli("ACL", "SETUSER", "nofn", "on", ">pw", "~*", "+@all", "-function");
    await redis.cli("CONFIG", "RESETSTAT");
    const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port, username: "nofn", password: "pw" }], timeoutMs: 2000, logger: silent });
    try {
      await store.start();
      expect(store.status().nodes[0].scripts).toBe("evalsha");
      const results = await store.apply(0, [tb("sha:tb", 3, 1), fw("sha:fw", 2)]);
      expect(results.map((r) => [r.allowed, r.remaining])).toEqual([
        [true, 2],
        [true, 1],
      ]);
      expect(await calls("evalsha")).toBe(1);
      expect(await calls("fcall")).toBe(0);
    } finally {
      await store.close();
      await redis.cli("ACL", "DELUSER", "nofn");
    }
  });
});
