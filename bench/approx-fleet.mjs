// Approximate limits across a fleet: one redis-server, N `sluice serve` processes (dist/bin.js) on it, and one
// approximate limit per algorithm (5,000 a minute, leases of sync_interval_ms 100 by default) loaded at a paced
// rate spread round robin over the instances (one gRPC connection each), far under the limit. Prints, per
// algorithm, the Redis script calls (FCALL/EVALSHA/EVAL from INFO commandstats, reset before the load) per
// request: what the lease engine costs in steady use.
//   npm run build && node bench/approx-fleet.mjs [--rps 200] [--duration 10] [--instances 3] [--interval 100]
//     [--limit 5000] [--algorithms fixed_window,token_bucket,sliding_window]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { encodeRequest, grpcFrame, RLS_PATH } from "./lib/frame.mjs";
import { H2Connection } from "./lib/h2-connection.mjs";
import { ROOT, shebangNodeFlags, startListening } from "./lib/procs.mjs";
import { snapshot, startRedis } from "./lib/redis.mjs";

const { values: o } = parseArgs({
  options: {
    rps: { type: "string", default: "200" },
    duration: { type: "string", default: "10" },
    instances: { type: "string", default: "3" },
    interval: { type: "string", default: "100" },
    limit: { type: "string", default: "5000" },
    algorithms: { type: "string", default: "fixed_window,token_bucket,sliding_window" },
  },
});
const rps = Number(o.rps);
const durationS = Number(o.duration);
const algorithms = o.algorithms.split(",");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-approx-fleet-"));
const rules = algorithms
  .map((a) => `  - key: ${a}\n    rate_limit: {unit: minute, requests_per_unit: ${o.limit}, algorithm: ${a}, approximate: {sync_interval_ms: ${o.interval}}}`)
  .join("\n");
fs.writeFileSync(path.join(dir, "fleet.yaml"), `domain: fleet\ndescriptors:\n${rules}\n`);

const redis = await startRedis();
const bin = path.join(ROOT, "dist/bin.js");
const fleet = [];
try {
  for (let i = 0; i < Number(o.instances); i++) {
    const args = ["serve", "--config", dir, "--redis", redis.url, "--port", "0", "--admin-port", "0"];
    fleet.push(await startListening(bin, args, {}, shebangNodeFlags(bin)));
  }
  console.log(`${fleet.length} instances, ${rps} requests/s round robin for ${durationS} s, limit ${o.limit}/minute, sync_interval_ms ${o.interval}`);
  for (const a of algorithms) {
    const r = await load(a);
    console.log(
      `${a.padEnd(15)} requests ${r.sent}  ok ${r.ok}  over_limit ${r.over}  errors ${r.errors}  script calls ${r.calls}  per request ${(r.calls / r.sent).toFixed(3)}`,
    );
  }
} finally {
  for (const p of fleet) await p.stop();
  await redis.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}

/** The paced load on one algorithm's key; script calls counted from its first request until its leases ended after it. */
async function load(algorithm) {
  const body = grpcFrame(encodeRequest("fleet", [[[algorithm, "one"]]]));
  const counts = { ok: 0, over: 0, errors: 0, done: 0 };
  const conns = fleet.map(
    (p) =>
      new H2Connection(p.port, RLS_PATH, (code) => {
        counts.done++;
        if (code === 1) counts.ok++;
        else if (code === 2) counts.over++;
        else counts.errors++;
      }),
  );
  await Promise.all(conns.map((c) => c.ready));
  await redis.cli("CONFIG", "RESETSTAT");
  const total = Math.round(rps * durationS);
  let sent = 0;
  const t0 = performance.now();
  await new Promise((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rps));
      for (; sent < due; sent++) conns[sent % conns.length].send(body, performance.now());
      if (sent < total) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  const deadline = Date.now() + 10_000;
  while (counts.done < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  // The leases out when the load stops end (and give back) within an interval or two: that cost is the load's.
  await new Promise((r) => setTimeout(r, 4 * Number(o.interval) + 200));
  const calls = (await snapshot([redis])).scriptCalls; // since the CONFIG RESETSTAT above
  for (const c of conns) c.close();
  return { sent, ...counts, calls };
}
