// A real Redis Sentinel deployment for tests: one master, one replica (or more) and three sentinels
// (`redis-server CONF --sentinel`, quorum 2) on free ports, with passwords if asked, fast failure
// detection (down-after 1 s). Every wait polls the processes for the state it needs; no fixed sleeps.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "./ports.js";
import { track } from "./children.js";
import { until } from "./wait.js";

export const MASTER_NAME = "mymaster";
/** Sentinel's down-after-milliseconds and failover-timeout here: a failover takes a few seconds. */
export const DOWN_AFTER_MS = 1000;
export const FAILOVER_TIMEOUT_MS = 4000;
/** A redis-cli call is ended after this: above the longest WAIT a test gives (20 s), for a busy host's sake. */
const CLI_TIMEOUT_MS = 30_000;

export interface SentinelProc {
  port: number;
  proc: ChildProcess;
  /** redis-cli against this process (authenticated when it has a password); resolves with stdout. */
  cli(...args: string[]): Promise<string>;
  /** SIGKILL (a crash); resolves once the process exited. */
  kill(): Promise<void>;
}

export interface SentinelGroup {
  /** The data nodes: the first master, then its replicas. */
  redis: SentinelProc[];
  sentinels: SentinelProc[];
  /** MASTER@host:port,... for --redis-sentinel. */
  spec: string;
  /** The master's address as a sentinel reports it (SENTINEL get-master-addr-by-name). */
  masterAddr(sentinel?: number): Promise<string>;
  /** The data node serving at this port. */
  node(port: number): SentinelProc;
  /** Waits until every sentinel names this port as the master and the node there says role:master. */
  waitForMaster(port: number, timeoutMs?: number): Promise<void>;
  /**
   * The data node every sentinel names as master, once they agree and it says role:master (one sentinel
   * alone may still name the old master for a moment after a failover).
   */
  agreedMaster(timeoutMs?: number): Promise<SentinelProc>;
  /** Waits until the node at `port` replicates from the one at `masterPort` with its link up. */
  waitForReplica(port: number, masterPort: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface SentinelOptions {
  /** requirepass of master and replica (sentinels use it as auth-pass, the replica as masterauth). */
  password?: string;
  /** requirepass of the sentinels (they authenticate to each other with it too). */
  sentinelPassword?: string;
  /** Replicas of the first master (default 1). */
  replicas?: number;
}

export async function startSentinelGroup(o: SentinelOptions = {}): Promise<SentinelGroup> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-sentinel-"));
  const procs: SentinelProc[] = [];
  try {
    const master = await spawnDataNode(dir, o);
    const masterPort = master.port;
    procs.push(master);
    const replicas: SentinelProc[] = [];
    for (let i = 0; i < (o.replicas ?? 1); i++) {
      const replica = await spawnDataNode(dir, o, ["--replicaof", "127.0.0.1", String(masterPort)]);
      procs.push(replica);
      replicas.push(replica);
    }
    for (const r of replicas) await replicaOf(r, masterPort, 15_000);

    const sentinels: SentinelProc[] = [];
    for (let i = 0; i < 3; i++) {
      const s = await spawnSentinel(dir, `sentinel-${i}.conf`, masterPort, 2, o, [
        `sentinel down-after-milliseconds ${MASTER_NAME} ${DOWN_AFTER_MS}`,
        `sentinel failover-timeout ${MASTER_NAME} ${FAILOVER_TIMEOUT_MS}`,
        `sentinel parallel-syncs ${MASTER_NAME} 1`,
      ]);
      procs.push(s);
      sentinels.push(s);
    }
    // A failover needs quorum (2) and a majority to elect a leader: every sentinel must know the other two
    // (hello messages on the master, every 2 s) and the replicas (the master's INFO), or the first kill would
    // leave the master without a successor.
    await until(
      async () => {
        for (const s of sentinels) {
          if (!/^OK 3 usable Sentinels/.test(await s.cli("SENTINEL", "CKQUORUM", MASTER_NAME))) return false;
          const known = await s.cli("SENTINEL", "REPLICAS", MASTER_NAME);
          if (!replicas.every((r) => known.includes(String(r.port)))) return false;
        }
        return true;
      },
      30_000,
      "the sentinels to know each other and the replicas",
      50,
    );

    const group: SentinelGroup = {
      redis: [master, ...replicas],
      sentinels,
      spec: `${MASTER_NAME}@${sentinels.map((s) => `127.0.0.1:${s.port}`).join(",")}`,
      async masterAddr(i = 0) {
        const [host, port] = (await sentinels[i].cli("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)).trim().split("\n");
        return `${host}:${port}`;
      },
      node(port) {
        const n = group.redis.find((r) => r.port === port);
        if (!n) throw new Error(`no data node on port ${port}`);
        return n;
      },
      async waitForMaster(port, timeoutMs = 30_000) {
        await until(
          async () => {
            for (let i = 0; i < sentinels.length; i++) if ((await group.masterAddr(i)) !== `127.0.0.1:${port}`) return false;
            return /role:master/.test(await group.node(port).cli("INFO", "replication"));
          },
          timeoutMs,
          `127.0.0.1:${port} to be the master`,
          50,
        );
      },
      async agreedMaster(timeoutMs = 30_000) {
        let port = 0;
        await until(
          async () => {
            const named = new Set<string>();
            for (let i = 0; i < sentinels.length; i++) named.add(await group.masterAddr(i));
            if (named.size !== 1) return false;
            port = Number([...named][0].split(":")[1]);
            return /role:master/.test(await group.node(port).cli("INFO", "replication"));
          },
          timeoutMs,
          "the sentinels to agree on a master",
          50,
        );
        return group.node(port);
      },
      waitForReplica: (port, masterPort, timeoutMs = 30_000) => replicaOf(group.node(port), masterPort, timeoutMs),
      async stop() {
        await Promise.all(procs.map((p) => p.kill()));
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
    return group;
  } catch (err) {
    await Promise.all(procs.map((p) => p.kill()));
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * A sentinel of its own that names MASTER_NAME as a lone master of its own (no replica, no other sentinel):
 * listed among a group's sentinels it answers a lookup as a sentinel that has not heard of a failover would,
 * with a server that is up and says role:master but is not the one announced.
 */
export async function startStraySentinel(o: SentinelOptions = {}): Promise<{ sentinel: SentinelProc; master: SentinelProc; stop(): Promise<void> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-stray-"));
  const procs: SentinelProc[] = [];
  const stop = async () => {
    await Promise.all(procs.map((p) => p.kill()));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const master = await spawnDataNode(dir, o);
    procs.push(master);
    const sentinel = await spawnSentinel(dir, "sentinel.conf", master.port, 1, o);
    procs.push(sentinel);
    return { sentinel, master, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A redis-server (master or replica: `extra`) on a free port, without persistence, with the options' password. */
async function spawnDataNode(dir: string, o: SentinelOptions, extra: string[] = []): Promise<SentinelProc> {
  const port = await freePort();
  const auth = o.password ? ["--requirepass", o.password, "--masterauth", o.password] : [];
  return spawnNode(dir, port, [], ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...auth, ...extra], o.password);
}

/**
 * A sentinel on a free port monitoring MASTER_NAME at masterPort with this quorum, and `extra` config lines.
 * Sentinel rewrites its config file: each gets its own, `file` in `dir`.
 */
async function spawnSentinel(dir: string, file: string, masterPort: number, quorum: number, o: SentinelOptions, extra: string[] = []): Promise<SentinelProc> {
  const port = await freePort();
  const conf = path.join(dir, file);
  fs.writeFileSync(
    conf,
    [
      `port ${port}`,
      "bind 127.0.0.1",
      `dir ${dir}`,
      ...(o.sentinelPassword ? [`requirepass ${o.sentinelPassword}`] : []),
      `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${masterPort} ${quorum}`,
      ...(o.password ? [`sentinel auth-pass ${MASTER_NAME} ${o.password}`] : []),
      ...extra,
      "",
    ].join("\n"),
  );
  return spawnNode(dir, port, [conf, "--sentinel"], [], o.sentinelPassword);
}

function replicaOf(node: SentinelProc, masterPort: number, timeoutMs: number): Promise<void> {
  return until(
    async () => {
      const info = await node.cli("INFO", "replication");
      return /role:slave/.test(info) && new RegExp(`master_port:${masterPort}\\s`).test(info) && /master_link_status:up/.test(info);
    },
    timeoutMs,
    `127.0.0.1:${node.port} to replicate from port ${masterPort}`,
    50,
  );
}

/** redis-server with `first` (a config file and --sentinel) then `args`; resolves once it answers PING. */
async function spawnNode(dir: string, port: number, first: string[], args: string[], password?: string): Promise<SentinelProc> {
  const cli = (...a: string[]) =>
    new Promise<string>((resolve, reject) => {
      const auth = password ? ["-a", password, "--no-auth-warning"] : [];
      execFile("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...auth, ...a], { timeout: CLI_TIMEOUT_MS }, (err, stdout) =>
        err ? reject(err) : resolve(stdout),
      );
    });
  const proc = track(spawn("redis-server", [...first, ...args], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] }));
  let output = "";
  proc.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  proc.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const node: SentinelProc = {
    port,
    proc,
    cli,
    kill: () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      return exited;
    },
  };
  try {
    await until(
      async () => {
        if (proc.exitCode !== null) throw new Error("exited");
        return (await cli("PING")).trim() === "PONG";
      },
      10_000,
      `redis-server on port ${port} to start`,
      50,
    );
  } catch (err) {
    await node.kill();
    throw new Error(`${(err as Error).message}\n${output}`);
  }
  return node;
}
