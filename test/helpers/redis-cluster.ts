// A real Redis Cluster for tests: three masters (redis-server --cluster-enabled) joined with
// redis-cli --cluster create, on free ports, with full coverage not required so that one master
// down leaves the others serving.
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "./ports.js";
import { startRedis, type RedisProcess } from "./redis-server.js";

export interface RedisClusterProcess {
  nodes: RedisProcess[];
  /** host:port,host:port,... for --redis-cluster. */
  spec: string;
  /** The node that owns a slot (redis-cli CLUSTER SHARDS on any node). */
  stop(): Promise<void>;
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, (err, stdout, stderr) => (err ? reject(new Error(`${cmd} ${args.join(" ")}: ${stderr || err.message}`)) : resolve(stdout))),
  );
}

export async function startRedisCluster(masters = 3): Promise<RedisClusterProcess> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cluster-"));
  const nodes: RedisProcess[] = [];
  for (let i = 0; i < masters; i++) {
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
          "2000",
          "--cluster-require-full-coverage",
          "no",
          "--dir",
          nodeDir,
        ],
      }),
    );
  }
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  await run("redis-cli", ["--cluster", "create", ...addresses, "--cluster-replicas", "0", "--cluster-yes"]);
  const deadline = Date.now() + 20_000;
  for (;;) {
    const infos = await Promise.all(nodes.map((n) => n.cli("CLUSTER", "INFO")));
    if (infos.every((i) => /cluster_state:ok/.test(i) && new RegExp(`cluster_known_nodes:${masters}`).test(i))) break;
    if (Date.now() > deadline) throw new Error(`cluster did not become ready:\n${infos.join("\n")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    nodes,
    spec: addresses.join(","),
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Which master (index into nodes) owns the slot of a key, from CLUSTER KEYSLOT and CLUSTER SLOTS. */
export async function ownerOf(cluster: RedisClusterProcess, key: string): Promise<number> {
  const slot = Number((await cluster.nodes[0].cli("CLUSTER", "KEYSLOT", key)).trim());
  const ranges = await slotRanges(cluster);
  const hit = ranges.find((r) => slot >= r.from && slot <= r.to);
  if (!hit) throw new Error(`no owner for slot ${slot}`);
  return hit.node;
}

/** The slot ranges of every master as node indexes. */
export async function slotRanges(cluster: RedisClusterProcess): Promise<{ from: number; to: number; node: number }[]> {
  // CLUSTER SHARDS is verbose; CLUSTER NODES lines end with the slot ranges of each master.
  const lines = (await cluster.nodes[0].cli("CLUSTER", "NODES")).trim().split("\n");
  const out: { from: number; to: number; node: number }[] = [];
  for (const line of lines) {
    const parts = line.split(" ");
    const port = Number(parts[1].split("@")[0].split(":")[1]);
    const node = cluster.nodes.findIndex((n) => n.port === port);
    for (const range of parts.slice(8)) {
      const [from, to] = range.split("-").map(Number);
      out.push({ from, to: to ?? from, node });
    }
  }
  return out;
}
