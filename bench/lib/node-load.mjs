// The Node load generator: used when h2load is missing, and for many distinct clients (h2load sends
// one fixed body). Pre-encoded gRPC requests with the client id patched into a template per request,
// over minimal HTTP/2 connections (h2-connection.mjs). Prints one JSON line: counts and latencies.
//   node bench/lib/node-load.mjs '<json options>'   (see load.mjs: runNodeLoad())
import { H2Connection } from "./h2-connection.mjs";
import { RLS_PATH, requestTemplate } from "./frame.mjs";
import { DESCRIPTOR_SETS } from "./scenarios.mjs";
import { percentiles } from "./stats.mjs";

// { port, connections, streams, durationS, warmupS, rps (0 = closed loop), count (0 = by duration;
//   else exactly this many requests, no warm-up, all answers awaited), domain, set, clients,
//   sequential (clients in order 0, 1, 2 ...: with count = clients each client is sent exactly once) }
const o = JSON.parse(process.argv[2]);
const template = requestTemplate(o.domain, DESCRIPTOR_SETS[o.set]);

// xorshift32: uniform client ids without Math.random's cost.
let seed = (0x9e3779b9 ^ process.pid) >>> 0 || 1;
let nextInOrder = 0;
function nextClient() {
  if (o.sequential) return nextInOrder++ % o.clients;
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) % o.clients;
}

let measuring = false;
let stopped = false;
let latencies = new Float64Array(1 << 20);
const counts = { done: 0, ok: 0, overLimit: 0, errors: 0 };

function record(code, started) {
  if (!measuring) return;
  if (counts.done === latencies.length) {
    const grown = new Float64Array(latencies.length * 2);
    grown.set(latencies);
    latencies = grown;
  }
  latencies[counts.done++] = (performance.now() - started) * 1000;
  if (code === 1) counts.ok++;
  else if (code === 2) counts.overLimit++;
  else counts.errors++;
}

let sent = 0;
/** Whether one more request may start: by duration until stopped, or up to the exact count. */
const mayStart = () => !stopped && (o.count === 0 || sent < o.count);
let drained;
const allAnswered = new Promise((r) => (drained = r));

function start(c) {
  sent++;
  c.send(template.forClient(nextClient()), performance.now());
}

const connections = [];
for (let i = 0; i < o.connections; i++) {
  const c = new H2Connection(o.port, RLS_PATH, (code, started) => {
    record(code, started);
    // Closed loop: each answer starts the next request on the same connection.
    if (o.rps === 0 && mayStart()) start(c);
    if (o.count > 0 && counts.done === o.count) drained();
  });
  connections.push(c);
}
await Promise.all(connections.map((c) => c.ready));

if (o.rps > 0) {
  // Open loop: requests start on schedule whatever the answers do, spread over the connections.
  const t = performance.now();
  const tick = () => {
    const due = Math.floor(((performance.now() - t) / 1000) * o.rps);
    while (sent < due && mayStart()) start(connections[sent % connections.length]);
    if (mayStart()) setTimeout(tick, 1);
  };
  tick();
} else {
  for (const c of connections) for (let i = 0; i < o.streams && mayStart(); i++) start(c);
}

let seconds;
if (o.count > 0) {
  measuring = true;
  const t0 = performance.now();
  await allAnswered;
  seconds = (performance.now() - t0) / 1000;
} else {
  await new Promise((r) => setTimeout(r, o.warmupS * 1000));
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, o.durationS * 1000));
  measuring = false;
  seconds = (performance.now() - t0) / 1000;
  stopped = true;
}
process.stdout.write(
  JSON.stringify({
    generator: "node",
    seconds,
    rps: counts.done / seconds,
    ...counts,
    latencyUs: percentiles(latencies.subarray(0, counts.done)),
  }) + "\n",
);
for (const c of connections) c.close();
process.exit(0);
