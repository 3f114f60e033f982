// Redis time per check against the reference token-bucket script, bytes per key and per client, sluice's RSS
// (lib/redis-cost.mjs). `npm run bench -- --redis-cost` runs the same and stores it in the
// results JSON; this prints it alone.
//   npm run build && node bench/redis-cost.mjs [--calls N] [--keys N] [--rounds N] [--sets tb1,fw1,sw1,q1,...]
//        [--clients N] [--no-memory] [--no-process] [--inner] [--paced] [--out FILE]
//   --rps N: send through sluice at N requests/s (default 0: closed loop, as fast as sluice answers)
//   --paced: also both scripts with one call in flight (the replays' client with -c 1), Redis idle between calls
//   --redis-cpu N: every redis-server on core N, this process, sluice and the load on the others (lib/pin.mjs)
import fs from "node:fs";
import { parseArgs } from "node:util";
import { pinAwayFromRedis } from "./lib/pin.mjs";
import { formatCost, formatInner, runRedisCost } from "./lib/redis-cost.mjs";

const { values: o } = parseArgs({
  options: {
    calls: { type: "string", default: "20000" },
    keys: { type: "string", default: "10000" },
    rounds: { type: "string", default: "2" },
    sets: { type: "string" },
    clients: { type: "string", default: "100000" },
    memory: { type: "boolean", default: true },
    process: { type: "boolean", default: true },
    inner: { type: "boolean" },
    paced: { type: "boolean" },
    rps: { type: "string", default: "0" },
    "redis-cpu": { type: "string" },
    out: { type: "string" },
  },
  allowNegative: true,
});
const redisCpu = o["redis-cpu"] === undefined ? undefined : Number(o["redis-cpu"]);
if (redisCpu !== undefined) pinAwayFromRedis(redisCpu);
const r = await runRedisCost(
  {
    calls: Number(o.calls),
    keys: Number(o.keys),
    rounds: Number(o.rounds),
    sets: o.sets?.split(","),
    clients: Number(o.clients),
    memory: o.memory,
    process: o.process,
    paced: o.paced,
    rps: Number(o.rps),
  },
  (line) => console.log(line),
);
console.log("\n" + formatCost(r));
if (o.inner) console.log("\n" + formatInner(r));
if (o.out) fs.writeFileSync(o.out, JSON.stringify({ date: new Date().toISOString(), redisCpu: redisCpu ?? null, redisCost: r }, null, 2) + "\n");
