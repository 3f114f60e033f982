// A real Redis Cluster for tests: masters (redis-server --cluster-enabled), each with `replicas` replicas,
// joined with redis-cli --cluster create, on free ports. Full coverage is not required unless asked, so that
// one master down leaves the others serving. Nodes keep their nodes.conf: a killed node restarted rejoins
// (as a replica of whoever took its slots).
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "./ports.js";
import { startRedis, type RedisProcess } from "./redis-server.js";
import { until } from "./wait.js";

export interface RedisClusterProcess {
  /** Every node, masters first as created (node i < masters is a master at the start). */
  nodes: RedisProcess[];
  /** host:port,host:port,... for --redis-cluster. */
  spec: string;
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  masters?: number;
  /** Replicas per master (default 0). */
  replicas?: number;
  /** cluster-node-timeout (default 2000 ms). */
  nodeTimeoutMs?: number;
  /** cluster-require-full-coverage (default false). */
  fullCoverage?: boolean;
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, (err, stdout, stderr) => (err ? reject(new Error(`${cmd} ${args.join(" ")}: ${stderr || err.message}`)) : resolve(stdout))),
  );
}

export async function startRedisCluster(o: number | RedisClusterOptions = 3): Promise<RedisClusterProcess> {
  const { masters = 3, replicas = 0, nodeTimeoutMs = 2000, fullCoverage = false } = typeof o === "number" ? { masters: o } : o;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cluster-"));
  const nodes: RedisProcess[] = [];
  const stopAll = async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    return await create();
  } catch (err) {
    await stopAll(); // nothing left running when the start fails
    throw err;
  }

  async function create(): Promise<RedisClusterProcess> {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      const nodeDir = path.join(dir, `n${i}`);
      fs.mkdirSync(nodeDir);
      nodes.push(
        await startRedis({
          args: [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            path.join(nodeDir, "nodes.conf"),
            // The bus port would be port + 10000, which may not exist for a high free port.
            "--cluster-port",
            String(await freePort()),
            "--cluster-node-timeout",
            String(nodeTimeoutMs),
            "--cluster-require-full-coverage",
            fullCoverage ? "yes" : "no",
            "--dir",
            nodeDir,
          ],
        }),
      );
    }
    const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
    await run("redis-cli", ["--cluster", "create", ...addresses, "--cluster-replicas", String(replicas), "--cluster-yes"]);
    const cluster: RedisClusterProcess = { nodes, spec: addresses.join(","), stop: stopAll };
    await waitForClusterOk(cluster, 30_000);
    return cluster;
  }
}

/** Waits until every running node says cluster_state:ok, knows every node, and every replica's link is up. */
export async function waitForClusterOk(cluster: RedisClusterProcess, timeoutMs = 20_000): Promise<void> {
  let infos: string[] = [];
  const ready = async () => {
    const running = cluster.nodes.filter((n) => n.proc.exitCode === null && n.proc.signalCode === null);
    infos = await Promise.all(running.map(async (n) => `${await n.cli("CLUSTER", "INFO")}${await n.cli("INFO", "replication")}`)).catch(() => [""]);
    const ok = infos.every(
      (i) =>
        /cluster_state:ok/.test(i) &&
        new RegExp(`cluster_known_nodes:${cluster.nodes.length}\\b`).test(i) &&
        (/role:master/.test(i) || /master_link_status:up/.test(i)),
    );
    return ok && infos.length === running.length;
  };
  await until(ready, timeoutMs, () => `the cluster to become ready:\n${infos.join("\n")}`, 50);
}

/** The node's role as it reports it (INFO replication): "master" or "slave". */
export async function roleOf(node: RedisProcess): Promise<string> {
  return /role:(\w+)/.exec(await node.cli("INFO", "replication"))?.[1] ?? "unknown";
}

/** The replicas of a master (index into nodes), from CLUSTER NODES. */
export async function replicasOf(cluster: RedisClusterProcess, master: number): Promise<number[]> {
  const lines = (await cluster.nodes[master].cli("CLUSTER", "NODES")).trim().split("\n");
  const self = lines.find((l) => l.includes("myself"))!.split(" ")[0];
  return lines
    .filter((l) => l.split(" ")[3] === self)
    .map((l) => Number(l.split(" ")[1].split("@")[0].split(":")[1]))
    .map((port) => cluster.nodes.findIndex((n) => n.port === port));
}

/** Which master (index into nodes) owns the slot of a key, from CLUSTER KEYSLOT and CLUSTER SLOTS. */
export async function ownerOf(cluster: RedisClusterProcess, key: string): Promise<number> {
  const live = cluster.nodes.find((n) => n.proc.exitCode === null && n.proc.signalCode === null)!;
  const slot = Number((await live.cli("CLUSTER", "KEYSLOT", key)).trim());
  const ranges = await slotRanges(cluster);
  const hit = ranges.find((r) => slot >= r.from && slot <= r.to);
  if (!hit) throw new Error(`no owner for slot ${slot}`);
  return hit.node;
}

/** The slot ranges of every master as node indexes. */
export async function slotRanges(cluster: RedisClusterProcess): Promise<{ from: number; to: number; node: number }[]> {
  // CLUSTER SHARDS is verbose; CLUSTER NODES lines end with the slot ranges of each master.
  const live = cluster.nodes.find((n) => n.proc.exitCode === null && n.proc.signalCode === null)!;
  const lines = (await live.cli("CLUSTER", "NODES")).trim().split("\n");
  const out: { from: number; to: number; node: number }[] = [];
  for (const line of lines) {
    const parts = line.split(" ");
    if (!parts[2].includes("master") || parts[2].includes("fail")) continue;
    const port = Number(parts[1].split("@")[0].split(":")[1]);
    const node = cluster.nodes.findIndex((n) => n.port === port);
    for (const range of parts.slice(8).filter((r) => !r.startsWith("["))) {
      const [from, to] = range.split("-").map(Number);
      out.push({ from, to: to ?? from, node });
    }
  }
  return out;
}
