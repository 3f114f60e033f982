// sluice's own hot path without gRPC: Limiter.shouldRateLimit over the memory store or a Redis of its
// own, with a fixed number of calls in flight. For before/after comparisons of a change to the limiter,
// the stores or the Lua scripts, steadier than the end-to-end bench on a shared machine.
//   npm run build && node bench/hot-path.mjs [--store memory|redis] [--set tb2|tb5|hot] [--clients N]
//        [--inflight N] [--seconds S] [--rounds N] [--timeout MS]
// Prints per round: calls/s, CPU us per call of this process, and for Redis the script time and
// Redis CPU per call, and how many limits the failure policy answered (store errors, timeouts).
import { parseArgs } from "node:util";
import pino from "pino";
import { Limiter } from "../dist/limiter/limiter.js";
import { loadRuleDir } from "../dist/rules/load.js";
import { MemoryStore } from "../dist/store/memory.js";
import { RedisStore } from "../dist/store/redis-sharded.js";
import { snapshot, startRedis } from "./lib/redis.mjs";
import { DESCRIPTOR_SETS, DOMAIN } from "./lib/scenarios.mjs";
import { clientId } from "./lib/frame.mjs";
import { percentiles } from "./lib/stats.mjs";

const { values: o } = parseArgs({
  options: {
    store: { type: "string", default: "redis" },
    set: { type: "string", default: "tb2" },
    clients: { type: "string", default: "10000" },
    inflight: { type: "string", default: "64" },
    seconds: { type: "string", default: "3" },
    rounds: { type: "string", default: "3" },
    timeout: { type: "string", default: "1000" },
  },
});
const clients = Number(o.clients);
const inflight = Number(o.inflight);

const loaded = loadRuleDir(new URL("rules", import.meta.url).pathname, { mergeDomains: false });
if (!loaded.rules) throw new Error(JSON.stringify(loaded.errors));
const redis = o.store === "redis" ? await startRedis() : undefined;
const store = redis
  ? new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: Number(o.timeout), logger: pino({ level: "silent" }) })
  : new MemoryStore({ maxKeys: 1_000_000 });
await store.start();
const limiter = new Limiter(loaded.rules, store, { denyNoteMaxEntries: redis ? 10_000 : 0 });

// Requests as server/decode.ts builds them, prepared up front so only the limiter is measured.
const requests = Array.from({ length: Math.min(clients, 100_000) }, (_, n) => ({
  domain: DOMAIN,
  hitsAddend: 0,
  descriptors: DESCRIPTOR_SETS[o.set](clientId(n)).map((d) => ({ entries: d.map(([key, value]) => ({ key, value })) })),
}));

let seed = 0x9e3779b9;
function next() {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return requests[(seed >>> 0) % requests.length];
}

async function round(seconds) {
  let done = 0;
  let policy = 0;
  let over = 0;
  const latencies = [];
  const end = performance.now() + seconds * 1000;
  const cpu0 = process.cpuUsage();
  const r0 = redis ? await snapshot([redis]) : undefined;
  const t0 = performance.now();
  async function lane() {
    while (performance.now() < end) {
      const started = performance.now();
      const d = await limiter.shouldRateLimit(next());
      latencies.push((performance.now() - started) * 1000);
      done++;
      if (d.code === "OVER_LIMIT") over++;
      for (const x of d.outcomes) if (x.via.startsWith("policy")) policy++;
    }
  }
  await Promise.all(Array.from({ length: inflight }, lane));
  const wall = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const r1 = redis ? await snapshot([redis]) : undefined;
  const line = [`${Math.round(done / wall)} calls/s`, `${((cpu.user + cpu.system) / done).toFixed(1)} us CPU/call`];
  if (redis) {
    const calls = r1.scriptCalls - r0.scriptCalls;
    line.push(
      `${(calls / done).toFixed(3)} scripts/call`,
      `${((r1.scriptUsec - r0.scriptUsec) / Math.max(calls, 1)).toFixed(1)} us/script`,
      `Redis CPU ${(((r1.cpuSeconds - r0.cpuSeconds) * 1e6) / done).toFixed(1)} us/call`,
    );
  }
  const lat = percentiles(Float64Array.from(latencies));
  line.push(`p50/p99 ${(lat.p50 / 1000).toFixed(2)}/${(lat.p99 / 1000).toFixed(2)} ms`, `${policy} policy answers`, `${over} refused`);
  console.log(line.join(", "));
}

await round(1); // warm-up (JIT, keys created)
for (let i = 0; i < Number(o.rounds); i++) await round(Number(o.seconds));
if (redis) {
  const s = await snapshot([redis]);
  const usage = Number((await redis.cli("MEMORY", "USAGE", (await redis.cli("RANDOMKEY")).trim(), "SAMPLES", "0")).trim());
  console.log(`keys ${s.keys}, MEMORY USAGE of a random key ${usage} bytes`);
}
await store.close();
await redis?.stop();
