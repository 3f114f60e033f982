// The rule-scale measurement: N per-customer descriptors over 10 rule files (one domain each),
// real Redis; one file is rewritten while a caller calls another domain every 2 ms. Measures the start,
// the resident memory above a one-rule start, the slowest call while the file reloads and the reload's
// memory peak. Used by bench/rule-scale.mjs (standalone) and by the bench's rule-scale scenario.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { encodeRequest, grpcFrame, RLS_PATH } from "./frame.mjs";
import { H2Connection } from "./h2-connection.mjs";
import { ROOT, shebangNodeFlags, startListening } from "./procs.mjs";

export const FILES = 10;
const MAIN = path.join(ROOT, "dist/bin.js");

/** sluice on a rule directory and Redis, reloads by its watcher only; with its start time in seconds. */
export async function startRuleScaleSluice(dir, redis, timeoutMs = 120_000) {
  const t0 = performance.now();
  const s = await startListening(
    MAIN,
    ["serve", "--config", dir, "--redis", redis.url, "--host", "127.0.0.1", "--port", "0", "--admin-port", "0"],
    { SLUICE_LOG_LEVEL: "info", SLUICE_RELOAD_INTERVAL_S: "0" },
    shebangNodeFlags(MAIN),
    timeoutMs,
  );
  return { s, startS: (performance.now() - t0) / 1000 };
}

/** The text of file f of n descriptors in all: `key: api_key, value: cust-<i>`, its own limit. */
export function planFile(f, n, bump = 0) {
  const per = Math.ceil(n / FILES);
  const from = f * per;
  const to = Math.min(n, from + per);
  const lines = [`domain: plans${f}`, "descriptors:"];
  for (let i = from; i < to; i++) {
    lines.push("  - key: api_key", `    value: cust-${i}`, `    rate_limit: {unit: minute, requests_per_unit: ${1000 + (i % 100) + bump}}`);
  }
  // The domain the caller calls is never empty.
  if (from >= to) lines.push("  - key: api_key", "    value: cust-none", "    rate_limit: {unit: minute, requests_per_unit: 1}");
  return lines.join("\n") + "\n";
}

/** A temporary rule directory of n descriptors over FILES files. */
export function ruleDirOf(n) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-scale-"));
  for (let f = 0; f < FILES; f++) fs.writeFileSync(path.join(dir, `plans${f}.yaml`), planFile(f, n));
  return dir;
}

/** Resident memory of pid in MiB (Linux /proc). */
export function rssMiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Samples rssMiB(pid) every intervalMs until stop(); returns the peak. */
export function rssPeak(pid, intervalMs = 10) {
  let peak = 0;
  const t = setInterval(() => {
    try {
      peak = Math.max(peak, rssMiB(pid));
    } catch {
      /* exited */
    }
  }, intervalMs);
  return () => {
    clearInterval(t);
    return peak;
  };
}

/**
 * Calls domain/api_key=value every everyMs over one HTTP/2 connection (paced, one call in flight or more);
 * records each call's latency. stop() resolves with { calls, errors, slowestMs, p99Ms }.
 */
export async function pacedCaller(port, domain, value, everyMs = 2) {
  const body = grpcFrame(encodeRequest(domain, [[["api_key", value]]]));
  const lat = [];
  let errors = 0;
  const conn = new H2Connection(port, RLS_PATH, (code, started) => {
    lat.push(performance.now() - started);
    if (code !== 1 && code !== 2) errors++;
  });
  await conn.ready;
  let next = performance.now();
  let stopped = false;
  const tick = () => {
    if (stopped) return;
    const now = performance.now();
    // A late tick sends what fell due meanwhile: the caller does not slow down because the server stalls.
    while (next <= now) {
      conn.send(body, next);
      next += everyMs;
    }
    setTimeout(tick, Math.max(0, next - performance.now()));
  };
  tick();
  return {
    /** Latencies recorded so far (a window: slice from a mark). */
    lat,
    async stop() {
      stopped = true;
      const deadline = Date.now() + 10_000;
      while (conn.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      const unanswered = conn.inFlight;
      conn.close();
      return { calls: lat.length, errors: errors + unanswered };
    },
  };
}

export function slowest(lat) {
  let m = 0;
  for (const v of lat) if (v > m) m = v;
  return m;
}

export function p99(lat) {
  if (lat.length === 0) return 0;
  const s = [...lat].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))];
}

/**
 * Closed-loop load (connections x streams calls in flight) for durationS over customers of every domain,
 * while plans0.yaml is rewritten every rewriteS seconds (new limits each time).
 * Returns { calls, rps, p99Ms, slowestMs, errors, reloads }.
 */
export async function loadWithRewrites(port, dir, n, o) {
  const bodies = [];
  for (let k = 0; k < 1024; k++) {
    const i = Math.floor(Math.random() * n);
    const f = Math.min(FILES - 1, Math.floor(i / Math.ceil(n / FILES)));
    bodies.push(grpcFrame(encodeRequest(`plans${f}`, [[["api_key", `cust-${i}`]]])));
  }
  const lat = [];
  let errors = 0;
  let stop = false;
  let sent = 0;
  const conns = [];
  for (let c = 0; c < o.connections; c++) {
    const conn = new H2Connection(port, RLS_PATH, (code, started) => {
      lat.push(performance.now() - started);
      if (code !== 1 && code !== 2) errors++;
      if (!stop) conn.send(bodies[sent++ & 1023], performance.now());
    });
    conns.push(conn);
  }
  await Promise.all(conns.map((c) => c.ready));
  const t0 = performance.now();
  for (const conn of conns) for (let s = 0; s < o.streams; s++) conn.send(bodies[sent++ & 1023], performance.now());
  let reloads = 0;
  const rewrite = setInterval(() => {
    reloads++;
    fs.writeFileSync(path.join(dir, "plans0.yaml"), planFile(0, n, reloads));
  }, o.rewriteS * 1000);
  await new Promise((r) => setTimeout(r, o.durationS * 1000));
  stop = true;
  clearInterval(rewrite);
  const elapsed = (performance.now() - t0) / 1000;
  const deadline = Date.now() + 10_000;
  while (conns.some((c) => c.inFlight > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  for (const c of conns) c.close();
  return { calls: lat.length, rps: lat.length / elapsed, p99Ms: p99(lat), slowestMs: slowest(lat), errors, reloads };
}
