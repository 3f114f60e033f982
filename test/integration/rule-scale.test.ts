// Rules at production scale: 100,000 per-customer descriptors (`key: api_key`, `value: cust-N`,
// each its own limit) in 10 domains, on real Redis. One domain's rules change while a caller in a process of
// its own calls another domain every 2 ms: no call waits past 30 ms (Envoy's ratelimit filter gives up at
// 20-100 ms and lets the request through; hashing a changed domain's 10,000 secret api_key values in one step
// held calls 33-52 ms until it ran in slices), none fails, and the new limits are in force. The same through
// xDS, all 100,000 in one response. Resident memory: at most 100 MiB above a one-rule sluice, and after the
// reloads at most 1.5x that steady state.
import { type ChildProcess, fork } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { MiB, rssBytes } from "../helpers/proc.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ROOT, ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";
import { encodeConfig, RATE_LIMIT_CONFIG_TYPE, startXdsServer, UNIT, type RateLimitConfigMsg, type XdsServer } from "../helpers/xds-server.js";
import { track } from "../helpers/children.js";
import { watchRunQueue } from "../helpers/run-queue.js";

const N = 100_000;
const DOMAINS = 10;
const PER = N / DOMAINS;
/** The bound on the slowest call while rules change (Envoy's filter timeout, above). */
const SLOWEST_MS = 30;
/** A busy host can hold any process for tens of milliseconds: a reload is measured again, at most this often. */
const ATTEMPTS = 8;
/** Starting with 100,000 descriptors on 2 busy cores (about 6 s on a quiet one). */
const START_MS = 120_000;
const TEST_MS = 240_000;

const limitOf = (i: number, bump: number) => 1000 + (i % 100) + bump;

function planFile(d: number, bump: number): string {
  const out = [`domain: plans${d}`, "descriptors:"];
  for (let i = d * PER; i < (d + 1) * PER; i++)
    out.push(`  - key: api_key\n    value: cust-${i}\n    rate_limit: {unit: minute, requests_per_unit: ${limitOf(i, bump)}}`);
  return `${out.join("\n")}\n`;
}

function planConfig(d: number, bump: number): RateLimitConfigMsg {
  const descriptors = [];
  for (let i = d * PER; i < (d + 1) * PER; i++)
    descriptors.push({ key: "api_key", value: `cust-${i}`, rate_limit: { unit: UNIT.MINUTE, requests_per_unit: limitOf(i, bump) } });
  return { name: `plans${d}`, domain: `plans${d}`, descriptors };
}

let redis: RedisProcess;
const sluices: SluiceProcess[] = [];
const clients: RlsClient[] = [];
const callers: ChildProcess[] = [];
const servers: XdsServer[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  for (const c of callers) c.kill();
  for (const c of clients) c.close();
  for (const s of sluices) await s.stop();
  for (const x of servers) await x.stop();
  await redis?.stop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

async function sluice(args: string[], env: Record<string, string> = {}) {
  const s = await startSluice([...args, "--redis", redis.url], env, { startTimeoutMs: START_MS });
  sluices.push(s);
  const c = rlsClient(s.port);
  clients.push(c);
  return { s, c };
}

/** The limit a descriptor gets now, checked without consuming (hits_addend 0). */
async function limitNow(c: RlsClient, domain: string, value: string): Promise<number | undefined> {
  const r = await c.shouldRateLimit({ domain, descriptors: [descriptor({ api_key: value }, { hits_addend: { value: 0 } })] });
  return r.statuses[0].current_limit?.requests_per_unit;
}

interface Window {
  calls: number;
  errors: number;
  slowestMs: number;
}

/** test/fixtures/paced-caller.mjs against domain/value; mark() opens a window, report() closes it. */
async function caller(port: number, domain: string, value: string) {
  const child = track(fork(path.join(ROOT, "test/fixtures/paced-caller.mjs"), [String(port), domain, value, "2"], { stdio: "ignore" }));
  callers.push(child);
  const ask = <T>(m: string) =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`caller did not answer '${m}'`)), 15_000);
      child.once("message", (a) => {
        clearTimeout(timer);
        resolve(a as T);
      });
      child.send(m);
    });
  return { pid: child.pid!, mark: () => ask<unknown>("mark"), report: () => ask<Window>("report") };
}

/**
 * A reload's window; where it was slower than the bound, a window as long without a reload right after it, and the
 * most the host kept sluice or the caller from a CPU within any span as long as the slowest call, in the window.
 */
interface Attempt {
  reload: Window;
  quiet?: Window;
  heldMs?: number;
}

/**
 * The host itself held calls past the bound just then, and the reload added at most the bound to that: a window
 * without a reload was as slow, or the kernel shows sluice or the caller waiting for a CPU that long.
 */
const busyHostExplains = (a: Attempt) =>
  (a.quiet !== undefined && a.quiet.slowestMs > SLOWEST_MS && a.reload.slowestMs <= a.quiet.slowestMs + SLOWEST_MS) ||
  (a.heldMs !== undefined && a.reload.slowestMs - a.heldMs <= SLOWEST_MS);

/**
 * Changes domain plans0 (bump: its new limits) while the caller calls plans9; `inForce` resolves once the
 * change was taken. Returns each attempt; stops at the first whose slowest call is within the bound, or whose
 * slowness a window without a reload, measured right after it, shows to be the host's.
 */
async function reloads(c: RlsClient, sluicePid: number, call: Awaited<ReturnType<typeof caller>>, change: (bump: number) => Promise<void>): Promise<Attempt[]> {
  const attempts: Attempt[] = [];
  const queue = watchRunQueue([sluicePid, call.pid], { allThreads: [sluicePid] });
  try {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const from = performance.now();
      await call.mark();
      await change(attempt);
      // The new limits, at both ends of the changed domain.
      expect(await limitNow(c, "plans0", "cust-0")).toBe(limitOf(0, attempt));
      expect(await limitNow(c, "plans0", `cust-${PER - 1}`)).toBe(limitOf(PER - 1, attempt));
      const reload = await call.report();
      const to = performance.now();
      const span = Math.max(1, reload.slowestMs);
      const heldMs = Math.max(queue.waitedMs(sluicePid, span, from, to), queue.waitedMs(call.pid, span, from, to));
      const a: Attempt = { reload, heldMs: Math.round(heldMs) };
      attempts.push(a);
      if (reload.slowestMs <= SLOWEST_MS) break;
      // As many calls as the reload window made (one every 2 ms): the slowest of more calls is larger.
      await call.mark();
      await sleep(Math.min(Math.max(1500, reload.calls * 2), 10_000));
      a.quiet = await call.report();
      if (busyHostExplains(a)) break;
    }
  } finally {
    queue.stop();
  }
  return attempts;
}

/** Reads `measure` until it is at most `bound`, for up to 30 s; returns the last reading. */
async function settledWithin(measure: () => number, bound: number): Promise<number> {
  const deadline = Date.now() + 30_000;
  let value = measure();
  while (value > bound && Date.now() < deadline) {
    await sleep(500);
    value = measure();
  }
  return value;
}

/** Waits for the n-th log line with this message (reloads are counted from start). */
async function nthLog(s: SluiceProcess, msg: string, n: number): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const lines = s.logs.map(safeJson).filter((l) => l?.msg === msg);
    if (lines.length >= n) return lines[n - 1]!;
    if (Date.now() > deadline) throw new Error(`no ${n}th '${msg}' within 60 s:\n${s.logs.slice(-20).join("\n")}`);
    await sleep(10);
  }
}

function safeJson(line: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/**
 * No failed call in any window, and one reload within the bound. Where none was, the host itself held calls
 * longer just then, and the reload added at most the bound to that: a window as long without a reload, right after
 * the reload's, held a call past the bound too, or the kernel shows sluice or the caller kept from a CPU within the
 * slowest call's span (a rule change that cost the event loop the whole set, seconds at this size, still fails).
 */
function expectWithinBound(attempts: Attempt[]): void {
  const all = JSON.stringify(attempts);
  for (const a of attempts) {
    for (const w of a.quiet ? [a.reload, a.quiet] : [a.reload]) {
      expect(w.errors, all).toBe(0);
      expect(w.calls).toBeGreaterThan(0);
    }
  }
  if (attempts.some((a) => a.reload.slowestMs <= SLOWEST_MS)) return;
  console.warn(`no reload within ${SLOWEST_MS} ms: ${all}`);
  expect(attempts.some(busyHostExplains), all).toBe(true);
}

describe(`${N.toLocaleString("en")} per-customer descriptors in 10 domains`, () => {
  it("in a rule directory: a file rewritten while a caller calls; no call past 30 ms, none failed, the new limits in force; at most 100 MiB above one rule, and the reloads within 1.5x of that steady state", {
    timeout: TEST_MS,
  }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-scale-"));
    dirs.push(dir);
    for (let d = 0; d < DOMAINS; d++) fs.writeFileSync(path.join(dir, `plans${d}.yaml`), planFile(d, 0));
    const oneRuleDir = ruleDir({
      "one.yaml": "domain: one\ndescriptors:\n  - key: api_key\n    value: cust-0\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
    });
    dirs.push(oneRuleDir);
    const env = { SLUICE_RELOAD_INTERVAL_S: "0" };
    const one = await sluice(["--config", oneRuleDir], env);
    const { s, c } = await sluice(["--config", dir], env);
    expect((await nthLog(s, "rules loaded", 1)).domains).toEqual(Object.fromEntries(Array.from({ length: DOMAINS }, (_, d) => [`plans${d}`, PER])));
    expect(await limitNow(c, "plans9", `cust-${N - 1}`)).toBe(limitOf(N - 1, 0));

    const call = await caller(s.port, "plans9", `cust-${N - 1}`);
    // The one-rule sluice gets the same traffic: the comparison is of rules, not of load.
    await caller(one.s.port, "one", "cust-0");
    // The steady state: 100,000 descriptors cost at most 100 MiB above one rule, once the compile
    // processes' memory is given back (within seconds).
    expect(await settledWithin(() => (rssBytes(s.proc.pid!) - rssBytes(one.s.proc.pid!)) / MiB, 100)).toBeLessThanOrEqual(100);
    const steady = rssBytes(s.proc.pid!);
    const attempts = await reloads(c, s.proc.pid!, call, async (bump) => {
      fs.writeFileSync(path.join(dir, "plans0.yaml"), planFile(0, bump));
      // Only the changed file was parsed again; sluice's own account of the event loop's part is within the bound.
      const line = await nthLog(s, "rules reloaded", bump);
      expect(line).toMatchObject({ parsedFiles: 1 });
      expect(line.longestStepMs).toBeLessThanOrEqual(SLOWEST_MS);
    });
    expectWithinBound(attempts);
    // Unchanged domains serve as before.
    expect(await limitNow(c, "plans9", `cust-${N - 1}`)).toBe(limitOf(N - 1, 0));

    // What the reloads leave (old generations of rules, freed at V8's next full collection, which it
    // schedules by its own heap growth) stays within the bound on a reload's peak: 1.5x the steady state.
    expect(await settledWithin(() => rssBytes(s.proc.pid!) / steady, 1.5)).toBeLessThanOrEqual(1.5);
  });

  it("through xDS, all in one response under the 4 MiB cap: one resource changed while a caller calls; then an empty response is refused", {
    timeout: TEST_MS,
  }, async () => {
    const x = await startXdsServer();
    servers.push(x);
    const asResource = (cfg: RateLimitConfigMsg) => ({ type_url: RATE_LIMIT_CONFIG_TYPE, value: encodeConfig(cfg) });
    const resources = Array.from({ length: DOMAINS }, (_, d) => asResource(planConfig(d, 0)));
    expect(resources.reduce((n, r) => n + r.value.length, 0)).toBeLessThan(4 << 20);
    // Each attempt's changed resource encoded before any caller's window opens: a window measures sluice, not
    // the test's own encoder (4 MiB of protobuf, on the same two cores).
    const edits = Array.from({ length: ATTEMPTS }, (_, i) => asResource(planConfig(0, i + 1)));
    x.setResources("v0", resources);
    const { s, c } = await sluice(["--config-xds", `127.0.0.1:${x.port}`]);
    expect(await limitNow(c, "plans9", `cust-${N - 1}`)).toBe(limitOf(N - 1, 0));

    const call = await caller(s.port, "plans9", `cust-${N - 1}`);
    const attempts = await reloads(c, s.proc.pid!, call, async (bump) => {
      resources[0] = edits[bump - 1]!;
      x.setResources(`v${bump}`, resources);
      await x.waitForRequest((r) => r.version_info === `v${bump}` && r.response_nonce !== "" && !r.error_detail, 60_000);
    });
    expectWithinBound(attempts);
    const applied = attempts.length;

    // No resources: refused (NACK), the last good rules keep serving.
    x.setConfigs("empty", []);
    const nack = await x.waitForRequest((r) => r.error_detail !== undefined && r.version_info === `v${applied}`);
    expect(nack.error_detail?.message).toMatch(/^\(response\): \(top\): the response holds no RateLimitConfig resources: sluice would enforce no limits/);
    expect(await limitNow(c, "plans0", "cust-0")).toBe(limitOf(0, applied));
    expect(await limitNow(c, "plans9", `cust-${N - 1}`)).toBe(limitOf(N - 1, 0));
  });
});
