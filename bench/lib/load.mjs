// The two load generators behind one call: h2load (nghttp2-client) for a fixed body, the Node
// generator (node-load.mjs) for many distinct clients or when h2load is missing.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { RLS_PATH, requestTemplate } from "./frame.mjs";
import { run } from "./procs.mjs";
import { DESCRIPTOR_SETS, DOMAIN } from "./scenarios.mjs";
import { percentiles } from "./stats.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));

export async function h2loadVersion() {
  try {
    return (await run("h2load", ["--version"])).trim();
  } catch {
    return undefined;
  }
}

/**
 * One measurement. o: { generator, port, set, clients, connections, streams, durationS, warmupS,
 * rps (0 = closed loop, as fast as it answers), count (send exactly this many, then drain; no warm-up) }.
 * Returns { generator, rps, done, ok?, overLimit?, errors?, latencyUs: {p50,p99,p999,max,mean,n} }.
 */
export function measure(o) {
  return o.generator === "h2load" ? runH2load(o) : runNodeLoad(o);
}

async function runH2load(o) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-h2load-"));
  const body = path.join(dir, "body.bin");
  const log = path.join(dir, "requests.log"); // h2load appends: a fresh file per run
  fs.writeFileSync(body, requestTemplate(DOMAIN, DESCRIPTOR_SETS[o.set]).forClient(0));
  const args = [
    "-t",
    "1",
    "-c",
    String(o.connections),
    "-m",
    String(o.streams),
    "-d",
    body,
    "--log-file",
    log,
    "-H",
    "content-type: application/grpc",
    "-H",
    "te: trailers",
  ];
  if (o.count) args.push("-n", String(o.count));
  else args.push("-D", String(o.durationS), "--warm-up-time", String(o.warmupS));
  if (o.rps > 0) args.push("--rps", String(Math.max(1, Math.round(o.rps / o.connections))));
  args.push(`http://127.0.0.1:${o.port}${RLS_PATH}`);
  try {
    const out = await run("h2load", args, { timeout: (o.durationS + o.warmupS + 60) * 1000 });
    const m = /finished in ([\d.]+)(m?s), ([\d.]+) req\/s/.exec(out);
    const r = /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
    if (!m || !r) throw new Error(`unexpected h2load output:\n${out}`);
    const latencies = fs
      .readFileSync(log, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => Number(l.split("\t")[2]));
    const seconds = Number(m[1]) / (m[2] === "ms" ? 1000 : 1);
    return {
      generator: "h2load",
      seconds: o.count ? seconds : o.durationS,
      // With -n the rate is over the whole run; with -D h2load reports it over the measured period.
      rps: o.count ? Number(r[2]) / seconds : Number(m[3]),
      done: Number(r[2]),
      // h2load sees HTTP only: a gRPC error is an HTTP 200 with grpc-status in the trailers.
      errors: Number(r[4]) + Number(r[5]) + Number(r[6]),
      latencyUs: percentiles(Float64Array.from(latencies)),
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function runNodeLoad(o) {
  const options = {
    port: o.port,
    connections: o.connections,
    streams: o.streams,
    durationS: o.durationS,
    warmupS: o.warmupS,
    rps: o.rps,
    count: o.count ?? 0,
    domain: DOMAIN,
    set: o.set,
    clients: o.clients,
    sequential: o.sequential === true,
  };
  const out = await run(process.execPath, [path.join(HERE, "node-load.mjs"), JSON.stringify(options)], {
    timeout: (o.durationS + o.warmupS + 60) * 1000,
  });
  const result = JSON.parse(out.trim().split("\n").pop());
  if (result.error) throw new Error(result.error);
  return result;
}
