// proto-loader's (de)serializers against hand-written ones (lib/codec.mjs): nanoseconds per message, and
// server CPU per call end to end on the no-op baseline with either codec (alternated, median of rounds).
//   npm run build && node bench/codec.mjs [--rounds N] [--requests N]
import assert from "node:assert/strict";
import os from "node:os";
import { parseArgs } from "node:util";
import * as protoLoader from "@grpc/proto-loader";
import { decodeRateLimitRequest, encodeRateLimitResponse } from "./lib/codec.mjs";
import { decodeRequest } from "../dist/server/decode.js";
import { LOADER_OPTIONS } from "../dist/server/protos.js";
import { toWireResponse } from "../dist/server/wire-response.js";
import { cpuSeconds } from "./lib/cpu.mjs";
import { requestTemplate } from "./lib/frame.mjs";
import { h2loadVersion, measure } from "./lib/load.mjs";
import { startListening } from "./lib/procs.mjs";
import { DESCRIPTOR_SETS } from "./lib/scenarios.mjs";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "3" }, requests: { type: "string", default: "60000" } } });
const rounds = Number(values.rounds);
const requests = Number(values.requests);

const def = protoLoader.loadSync(["envoy/service/ratelimit/v3/rls.proto"], LOADER_OPTIONS);
const method = def["envoy.service.ratelimit.v3.RateLimitService"].ShouldRateLimit;
const bounds = { maxDescriptors: 64, maxEntries: 32, maxKeyLength: 1024, maxValueLength: 131_072 };

const limit = { name: "", requestsPerUnit: 1_000_000_000, unit: "hour", unlimited: false };
const ok = (n) => toWireResponse({ code: "OK", statuses: Array.from({ length: n }, () => ({ code: "OK", limit, remaining: 999_999_998, resetSeconds: 1 })) });
const refused = toWireResponse({
  code: "OVER_LIMIT",
  retryAfterSeconds: 1,
  statuses: [{ code: "OVER_LIMIT", limit, remaining: 0, resetSeconds: 10, retryAfterSeconds: 1 }],
});
const withMetadata = toWireResponse({
  code: "OK",
  statuses: [{ code: "OK", limit, remaining: 4, resetSeconds: 60 }],
  metadata: [{ index: 0, metadata: { team: "payments", tier: 2, beta: true, tags: ["a", "b"] } }],
});

function nsPerOp(fn, n = 100_000) {
  let best = Infinity;
  for (let round = 0; round < 7; round++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) fn();
    best = Math.min(best, Number(process.hrtime.bigint() - t) / n);
  }
  return best;
}

console.log(`${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}, load average ${os.loadavg()[0].toFixed(2)}`);
console.log("\nper message (best of 7 rounds), ns: proto-loader -> hand-written");
const rows = [];
for (const set of ["tb2", "tb5"]) {
  const body = requestTemplate("bench", DESCRIPTOR_SETS[set]).forClient(42).subarray(5);
  assert.deepEqual({ ...decodeRateLimitRequest(body) }, { ...method.requestDeserialize(body) }, "the codecs decode differently");
  rows.push([
    `decode + bound-check, ${set} request (${body.length} B)`,
    nsPerOp(() => decodeRequest(method.requestDeserialize(body), bounds)),
    nsPerOp(() => decodeRequest(decodeRateLimitRequest(body), bounds)),
  ]);
}
for (const [name, res] of [
  ["encode OK, 2 statuses", ok(2)],
  ["encode OK, 5 statuses", ok(5)],
  ["encode OVER_LIMIT + headers + body", refused],
  ["encode OK + dynamic_metadata", withMetadata],
]) {
  if (!encodeRateLimitResponse(res).equals(method.responseSerialize(res))) throw new Error(`${name}: the codecs' bytes differ`);
  rows.push([name, nsPerOp(() => method.responseSerialize(res)), nsPerOp(() => encodeRateLimitResponse(res))]);
}
for (const [name, a, b] of rows) console.log(`  ${name.padEnd(42)} ${a.toFixed(0).padStart(6)} -> ${b.toFixed(0).padStart(6)}  (${(a / b).toFixed(2)}x)`);

// End to end: the same calls against the no-op baseline server with each codec.
const generator = (await h2loadVersion()) ? "h2load" : "node";
const samples = { "proto-loader": [], "hand-written": [] };
for (let r = 0; r < rounds; r++) {
  for (const codec of ["proto-loader", "hand-written"]) {
    const server = await startListening("bench/baseline.mjs", ["--port", "0", "--codec", codec]);
    try {
      const o = { generator, port: server.port, set: "tb2", clients: 1, connections: 4, streams: 16, durationS: 0, warmupS: 0, rps: 0 };
      await measure({ ...o, count: 10_000 }); // warm the JIT
      const before = cpuSeconds(server.pid);
      const m = await measure({ ...o, count: requests });
      samples[codec].push({ usPerCall: ((cpuSeconds(server.pid) - before) * 1e6) / m.done, rps: m.rps });
    } finally {
      await server.stop();
    }
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`\nno-op server end to end, ${generator}, ${requests} calls x ${rounds} rounds (median): server CPU per call, throughput`);
for (const [codec, s] of Object.entries(samples)) {
  console.log(
    `  ${codec.padEnd(13)} ${median(s.map((x) => x.usPerCall)).toFixed(1)} us/call  ${Math.round(median(s.map((x) => x.rps)))} req/s   (rounds: ${s.map((x) => x.usPerCall.toFixed(1)).join(", ")})`,
  );
}
