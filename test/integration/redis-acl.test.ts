// The least-privilege Redis user of docs/operating.md (src/store/redis-commands.ts's one list): under it the
// shipped rules, /top and the store contract work; with each of its commands taken away in turn, readiness names
// the command, one log line says so with the ACL command that grants it, and no key is left without its TTL,
// whatever the algorithm and whichever step of a script Redis refuses.
import crypto from "node:crypto";
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { aclSetUserLine, REDIS_COMMANDS } from "../../src/store/redis-commands.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import { runStoreContract, underPrefix } from "../contract/store.contract.js";
import { descriptor, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { sampleValue, scrape } from "../helpers/prom.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep, until } from "../helpers/wait.js";

const PASSWORD = `acl-${crypto.randomBytes(8).toString("hex")}`;

/** The docs' line, word by word, with this test's password: redis-cli `ACL ...` arguments. */
function docsUser(): string[] {
  return aclSetUserLine("sluice").replace(">PASSWORD", `>${PASSWORD}`).split(" ").slice(1);
}

/** Every key of the server with its PTTL (-1: no TTL). */
async function keyTtls(reader: Redis): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  let cursor = "0";
  do {
    const [next, keys] = await reader.scan(cursor, "COUNT", 1000);
    cursor = next;
    for (const k of keys) out[k] = await reader.pttl(k);
  } while (cursor !== "0");
  return out;
}

const noTtl = (ttls: Record<string, number>) => Object.entries(ttls).filter(([, t]) => t === -1);

async function readyz(s: SluiceProcess): Promise<{ store: { nodes: { state: string; scripts?: string; permissions?: Record<string, unknown> }[] } }> {
  return (await fetch(`http://127.0.0.1:${s.adminPort}/readyz`)).json() as never;
}

const parsed = (lines: string[]) =>
  lines.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });

describe("the docs' least-privilege user", () => {
  let redis: RedisProcess;
  let reader: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    await redis.cli("ACL", ...docsUser());
    reader = new Redis({ host: "127.0.0.1", port: redis.port, lazyConnect: true });
    await reader.connect();
  });
  afterAll(async () => {
    reader?.disconnect();
    await redis?.stop();
  });

  it("serves the shipped rules and /top: every command it needs is allowed, nothing refused, every key with its TTL", async () => {
    const s = await startSluice(["--config", "config", "--redis", redis.url], { SLUICE_REDIS_USERNAME: "sluice", SLUICE_REDIS_PASSWORD: PASSWORD });
    const c = rlsClient(s.port);
    try {
      const node = (await readyz(s)).store.nodes[0];
      expect(node.permissions).toEqual({ state: "ok" });
      expect(node.scripts).toBe("function");
      // Every layer of the edge rules; 121 calls from one address: the last is refused by Redis's count.
      const layers: Record<string, string>[] = [
        { remote_address: "198.51.100.7" },
        { account: "alice" },
        { api_key: "k-acl", plan: "free" },
        { login_account: "bob" },
      ];
      for (const d of layers) await c.shouldRateLimit({ domain: "edge", descriptors: [descriptor(d)] });
      const codes: number[] = [];
      for (let i = 0; i < 121; i++)
        codes.push((await c.shouldRateLimit({ domain: "edge", descriptors: [descriptor({ remote_address: "198.51.100.8" })] })).overall_code);
      expect(codes.filter((x) => x === 2)).toEqual([2]);
      // The refusal reaches /top (written within a second by the summaries' EVAL, read by PFCOUNT and ZUNION).
      await until(
        async () => {
          const res = await fetch(`http://127.0.0.1:${s.adminPort}/top`);
          const body = (await res.json()) as { rules: { rule: string; refused: number }[] };
          return res.status === 200 && body.rules.some((r) => r.rule === "edge.remote_address" && r.refused === 1);
        },
        10_000,
        () => "/top lists the refusal",
      );
      const samples = await scrape(s.adminPort);
      expect(samples.filter((x) => x.name === "sluice_store_script_errors_total")).toEqual([]);
      expect(sampleValue(samples, "sluice_store_errors_total", { node: `127.0.0.1:${redis.port}` })).toBe(0);
      expect(noTtl(await keyTtls(reader))).toEqual([]);
      expect(parsed(s.logs).filter((l) => (l.level as number) >= 40)).toEqual([]);
    } finally {
      c.close();
      await s.stop();
    }
  });
});

const RULES = `
domain: acl
descriptors:
  - key: fw
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: tb
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: token_bucket}
  - key: sw
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding_window}
  - key: q
    quota: {period: month, limit: 2}
  - key: multi
    rate_limit: {unit: minute, requests_per_unit: 2}
    quota: {period: day, limit: 3}
  - key: approx
    rate_limit: {unit: minute, requests_per_unit: 2, approximate: {sync_interval_ms: 10}}
`;

/** What the calls of one round ask: every algorithm alone (one check), several checks in one call, a lease; each past its limit. */
async function exercise(c: RlsClient, tag: string): Promise<void> {
  const one = (key: string) => ({ domain: "acl", descriptors: [descriptor({ [key]: tag })] });
  for (let i = 0; i < 3; i++) {
    await Promise.all(["fw", "tb", "sw", "q", "approx"].map((k) => c.shouldRateLimit(one(k))));
    await c.shouldRateLimit(one("multi"));
    await c.shouldRateLimit({ domain: "acl", descriptors: [descriptor({ fw: `${tag}-pair` }), descriptor({ tb: `${tag}-pair` })] });
  }
}

describe("each command of the list taken away in turn", () => {
  let redis: RedisProcess;
  let reader: Redis;
  let s: SluiceProcess;
  let c: RlsClient;
  beforeAll(async () => {
    redis = await startRedis();
    await redis.cli("ACL", ...docsUser());
    reader = new Redis({ host: "127.0.0.1", port: redis.port, lazyConnect: true });
    await reader.connect();
    s = await startSluice(["--config", ruleDir({ "acl.yaml": RULES }), "--redis", redis.url], {
      SLUICE_REDIS_USERNAME: "sluice",
      SLUICE_REDIS_PASSWORD: PASSWORD,
      SLUICE_STORE_TIMEOUT_MS: "2000",
    });
    c = rlsClient(s.port);
  });
  afterAll(async () => {
    c?.close();
    await s?.stop();
    reader?.disconnect();
    await redis?.stop();
  });

  // Not the cluster's two (no cluster here). Without FCALL or FUNCTION LOAD sluice uses EVALSHA, and with the
  // function library it never sends EVALSHA or SCRIPT LOAD: those four are not missing, and the others are.
  const optional = new Set(["fcall", "function|load", "evalsha", "script|load"]);
  const commands = REDIS_COMMANDS.filter((x) => x.need !== "cluster").map((x) => x.name);

  it("readiness names it, one log line says so with the ACL command that grants it, and no key is left without a TTL", async () => {
    let round = 0;
    for (const command of commands) {
      round++;
      // The docs' user less this one command, then a reconnect: the permission check runs again.
      await redis.cli("ACL", ...docsUser());
      await redis.cli("ACL", "SETUSER", "sluice", `-${command}`);
      const mark = s.logs.length;
      await redis.cli("CLIENT", "KILL", "USER", "sluice");
      await until(
        async () => parsed(s.logs.slice(mark)).some((l) => l.msg === "rate-limit store up"),
        10_000,
        () => `${command}: sluice reconnected`,
      );
      const node = (await readyz(s)).store.nodes[0];
      if (optional.has(command)) {
        expect(node.permissions, command).toEqual({ state: "ok" });
        expect(node.scripts, command).toBe(command === "fcall" || command === "function|load" ? "evalsha" : "function");
      } else {
        // (Without EVAL the others cannot be checked: a reason says so.)
        expect(node.permissions, command).toMatchObject({ state: "missing", missing: [command], fix: `ACL SETUSER sluice +${command}` });
      }

      // Every key new: the steps that make a key (and give it its TTL) are the ones a refusal could break.
      await reader.flushall();
      await exercise(c, `r${round}`);
      if (["pfadd", "zincrby", "zremrangebyrank", "expire"].includes(command)) {
        // The refusals' summaries go out within a second: wait until Redis refused that write.
        await until(
          async () =>
            (sampleValue(await scrape(s.adminPort), "sluice_store_script_errors_total", { node: `127.0.0.1:${redis.port}`, code: "NOPERM", command }) ?? 0) > 0,
          10_000,
          () => `${command}: the summaries' write was refused`,
        );
      }
      if (command === "pfcount" || command === "zunion") await fetch(`http://127.0.0.1:${s.adminPort}/top`);
      if (command === "pexpireat") {
        // The first call on a new key: INCRBY ran, PEXPIREAT was refused, the key went; counted by kind.
        const samples = await scrape(s.adminPort);
        expect(sampleValue(samples, "sluice_store_script_errors_total", { node: `127.0.0.1:${redis.port}`, code: "NOPERM", command })).toBeGreaterThan(0);
      }

      expect(noTtl(await keyTtls(reader)), command).toEqual([]);
      const lines = parsed(s.logs.slice(mark));
      const said = lines.filter((l) => String(l.msg).startsWith("the Redis user may not run commands sluice needs"));
      if (optional.has(command)) {
        expect(said, command).toEqual([]);
      } else {
        expect(
          said.map((l) => [l.missing, l.fix]),
          command,
        ).toEqual([[[command], `ACL SETUSER sluice +${command}`]]);
        // The refusals themselves are counted, not logged again.
        expect(
          lines.filter((l) => l.msg === "Redis refused a command sluice sent" && l.command === command),
          command,
        ).toEqual([]);
      }
    }
    // All of it back: the next connect finds nothing missing, and says so once.
    await redis.cli("ACL", ...docsUser());
    const mark = s.logs.length;
    await redis.cli("CLIENT", "KILL", "USER", "sluice");
    await until(
      async () => (await readyz(s)).store.nodes[0].permissions?.state === "ok" && parsed(s.logs.slice(mark)).some((l) => l.msg === "rate-limit store up"),
    );
    expect(parsed(s.logs.slice(mark)).filter((l) => l.msg === "the Redis user may run every command sluice needs")).toHaveLength(1);
  }, 120_000);

  it("a command taken away while connected: the first refusal has the permissions checked again, and readiness names it", async () => {
    await redis.cli("ACL", ...docsUser());
    await until(async () => (await readyz(s)).store.nodes[0].permissions?.state === "ok");
    await redis.cli("ACL", "SETUSER", "sluice", "-pexpireat");
    let n = 0;
    await until(
      async () => {
        await c.shouldRateLimit({ domain: "acl", descriptors: [descriptor({ fw: `live-${n++}` })] });
        return (await readyz(s)).store.nodes[0].permissions?.state === "missing";
      },
      15_000,
      () => "readiness names pexpireat",
      200,
    );
    expect((await readyz(s)).store.nodes[0].permissions).toEqual({ state: "missing", missing: ["pexpireat"], fix: "ACL SETUSER sluice +pexpireat" });
    expect(noTtl(await keyTtls(reader))).toEqual([]);
  });
});

describe("the store contract as the docs' user", () => {
  let redis: RedisProcess;
  let reader: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    await redis.cli("ACL", ...docsUser());
    reader = new Redis({ host: "127.0.0.1", port: redis.port, lazyConnect: true });
    await reader.connect();
  });
  afterAll(async () => {
    reader?.disconnect();
    await redis?.stop();
  });

  runStoreContract("redis, as the least-privilege ACL user of docs/operating.md", async () => {
    await redis.cli("FLUSHALL");
    const logger = pino({ level: "silent" });
    const store = new RedisStore({
      servers: [{ host: "127.0.0.1", port: redis.port, username: "sluice", password: PASSWORD }],
      timeoutMs: 5000,
      logger,
      permissionNeeds: { keyPrefix: "", summaries: true },
    });
    await store.start();
    expect(store.status().nodes[0].permissions).toEqual({ state: "ok" });
    return underPrefix(
      {
        store,
        advance: (ms) => sleep(ms + 5),
        cleanup: () => store.close(),
        nowMicros: async () => {
          const [sec, us] = (await reader.time()).map(Number);
          return sec * 1_000_000 + us;
        },
        keys: () => reader.keys("*"),
        pttl: (key) => reader.pttl(key),
      },
      "sluice:",
    );
  });
});
