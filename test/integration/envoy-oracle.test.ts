// The emulation (test/helpers/envoy-actions.ts) against Envoy 1.40 itself, request by request. Envoy runs the
// shipped envoy/envoy.yaml with only addresses changed, plus one response header naming the route it chose
// (x-route: %ROUTE_NAME%, observation only). In place of sluice sits a recording RateLimitService that answers
// OK, so every request Envoy lets through reaches the echo upstream. Each request comes from its own loopback
// address (127.1.x.y): remote_address names the request a call belongs to.
// For each generated request, what Envoy did (its status and Location, the route, the :path the app got, the
// call's descriptors, or no call) must equal what envoy-actions.ts predicts. Where they differ, Envoy is right.
// Then a sample of them goes through Envoy to a real sluice on Redis, and the counters sluice keeps must equal
// the model's descriptors mapped to store keys by `sluice explain`'s own code.
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { explain } from "../../src/inspect/explain.js";
import { SecretValues } from "../../src/core/secret.js";
import { SETTINGS } from "../../src/core/settings-table.js";
import { loadRuleDir } from "../../src/rules/load.js";
import { EnvoyEdge, type HttpRequest } from "../helpers/envoy-actions.js";
import { EDGE_ROWS } from "../helpers/envoy-edge-rows.js";
import {
  envoyAvailable,
  envoyLogOnFailure,
  shippedEnvoyConfig,
  startEchoUpstream,
  startEnvoy,
  type EchoUpstream,
  type EnvoyProcess,
} from "../helpers/envoy.js";
import type { WireRequest } from "../helpers/grpc-client.js";
import { watchKeys } from "../helpers/key-watch.js";
import { inOneMinute, redisClock } from "../helpers/minute.js";
import { freePort } from "../helpers/ports.js";
import { startRecordingRls, type RecordingRls } from "../helpers/recording-rls.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ROOT, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { getWindowCount, windowBaseKey } from "../helpers/window-key.js";

const edge = new EnvoyEdge();
const WITH_ENVOY = envoyAvailable(import.meta.filename);
type Obj = Record<string, any>;

// ---- the generator: deterministic (a seeded PRNG), so a difference can be replayed ----

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const LEADS = ["", "", "", "", "/", "//", "/.", "/./", "/a/..", "/x/../", "/a/b/../..", "/%2e", "/%2E%2E", "/a/.%2e", "/..", "/x\\..", "\\", "/static/.."];
const WORDS = [
  "search",
  "SEARCH",
  "Search",
  "sEaRcH",
  "login",
  "LOGIN",
  "Login",
  "orders",
  "",
  "searchable",
  "login-page",
  "%73earch",
  "se%61rch",
  "log%49n",
  "%4Cogin",
  "api/v1/items",
  "search.json",
];
const TAILS = [
  "",
  "",
  "",
  "/",
  "//",
  "/x",
  "/./",
  "/.",
  "/..",
  "/../search",
  "/../login",
  ";x",
  "%3F",
  "%2F",
  "%2fx",
  "%5C",
  "%5c..",
  "\\",
  "\\x",
  "~",
  "%7E",
  "%20",
  "|",
  "{}",
  "%",
  "%zz",
  "/%2e%2e",
];
const QUERIES = ["", "", "", "?", "?q=1", "?q=%2F", "?a=/../login", "?x=\\", "?q=a%5Cb", "?next=/search", "?q=%23"];
const METHODS = ["GET", "GET", "GET", "POST", "HEAD", "DELETE", "PUT", "OPTIONS"];
const HEADERS: Record<string, { names: string[]; values: (string | string[])[] }> = {
  "x-account-id": { names: ["x-account-id", "X-Account-Id"], values: ["acct-1", "acct-2", "ACCT-1", "", " padded ", "a,b", "%2F..", ["acct-1", "acct-2"]] },
  "x-api-key": { names: ["x-api-key", "X-API-KEY"], values: ["key-1", "key-2", "key-3", "", "k\\x", ["key-1", "key-3"]] },
  "x-plan": { names: ["x-plan", "X-Plan"], values: ["free", "pro", "Pro", "gold", "", ["pro", "free"]] },
  "x-login-account": { names: ["x-login-account", "X-Login-Account"], values: ["alice", "bob", "Alice", "", "alice@example.com", ["alice", "bob"]] },
};
const FORWARDED = ["10.0.0.1", "10.0.0.1, 192.0.2.1", "not-an-ip", "2001:db8::1", "127.0.0.1"];

/** n requests (clientIp left empty: the test gives each its source address). */
function generate(n: number, seed = 41): HttpRequest[] {
  const rand = prng(seed);
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)];
  const out: HttpRequest[] = [];
  for (let i = 0; i < n; i++) {
    let target = pick(LEADS) + "/" + pick(WORDS) + pick(TAILS) + pick(QUERIES);
    const form = rand();
    if (form < 0.06 && target.startsWith("/")) target = `http://example.com${target}`;
    else if (form < 0.09) target += "#frag";
    const headers: Record<string, string | string[]> = {};
    for (const h of Object.values(HEADERS)) if (rand() < 0.45) headers[pick(h.names)] = pick(h.values);
    if (rand() < 0.5) headers["x-forwarded-for"] = pick(FORWARDED);
    out.push({ method: pick(METHODS), path: target, headers, clientIp: "" });
  }
  return out;
}

// ---- observing Envoy ----

/** Each request's own loopback source address. */
const sourceAddress = (i: number) => `127.1.${Math.floor(i / 250)}.${(i % 250) + 1}`;

interface Outcome {
  status: number;
  location?: string;
  route: string;
  /** The :path the app received. */
  path?: string;
  descriptors: [string, string][][];
}

/** What the model says Envoy does. */
function predicted(req: HttpRequest): Outcome {
  const call = edge.call(req);
  return {
    status: call.reply?.status ?? 200,
    ...(call.reply?.location === undefined ? {} : { location: call.reply.location }),
    route: call.route,
    ...(call.path === undefined ? {} : { path: call.path }),
    descriptors: edge.descriptors(req),
  };
}

/** An empty string is absent on the wire (proto3): read back as "". */
const entriesOf = (r: WireRequest): [string, string][][] => r.descriptors.map((d) => d.entries.map((e) => [e.key, e.value ?? ""]));

/**
 * One HTTP/1.1 request on its own connection; header values may be lists (one line each). Settled on the
 * response's head: Envoy's codec-level 400 to a HEAD request carries a body, which Node's parser then refuses.
 */
function send(host: string, port: number, req: HttpRequest, localAddress: string): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const r = http.request({ host, port, method: req.method, path: req.path, headers: req.headers, agent: false, localAddress, timeout: 10_000 }, (res) => {
      res.resume();
      res.on("error", () => {}); // after the head: see above
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
    });
    r.on("timeout", () => r.destroy(new Error(`${req.path}: no answer from Envoy in 10 s`)));
    r.on("error", reject);
    r.end();
  });
}

interface Observer {
  upstream: EchoUpstream;
  rls: RecordingRls;
}

/** Sends the request and reads what Envoy did: one at a time, so what the upstream and the service saw is this request's. */
async function observe(o: Observer, host: string, port: number, req: HttpRequest): Promise<{ outcome: Outcome; calls: WireRequest[] }> {
  const calls0 = o.rls.calls.length;
  const seen0 = o.upstream.received.length;
  const res = await send(host, port, req, req.clientIp).catch((err: Error) => {
    throw new Error(`${req.method} ${JSON.stringify(req.path)}: ${err.message}`);
  });
  const calls = o.rls.calls.slice(calls0);
  const seen = o.upstream.received.slice(seen0);
  const outcome: Outcome = {
    status: res.status,
    ...(res.headers.location === undefined ? {} : { location: res.headers.location }),
    route: (res.headers["x-route"] as string | undefined) ?? "(none)",
    ...(seen.length === 1 ? { path: seen[0].path } : seen.length > 1 ? { path: `(${seen.length} requests)` } : {}),
    descriptors: calls.length === 1 ? entriesOf(calls[0]) : calls.length === 0 ? [] : [[["(calls)", String(calls.length)]]],
  };
  return { outcome, calls };
}

/** Whether this host has IPv6 loopback (a container may not). */
function hasIpv6Loopback(): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen(0, "::1", () => server.close(() => resolve(true)));
  });
}

/** The shipped file with the observation header, the listener also on ::1 for IPv6 clients when the host has it. */
async function observedConfig(sluicePort: number, appPort: number): Promise<{ config: Obj; port: number; port6?: number }> {
  const { config, listenerPort } = await shippedEnvoyConfig({ sluicePorts: [sluicePort], appPort });
  const listener = config.static_resources.listeners[0];
  listener.filter_chains[0].filters[0].typed_config.route_config.response_headers_to_add = [{ header: { key: "x-route", value: "%ROUTE_NAME%" } }];
  if (!(await hasIpv6Loopback())) {
    console.warn("envoy-oracle: no IPv6 loopback on this host, the table's IPv6 row is not sent to Envoy");
    return { config, port: listenerPort };
  }
  const v6 = structuredClone(listener);
  const port6 = await freePort();
  v6.name = "edge6";
  v6.address = { socket_address: { address: "::1", port_value: port6 } };
  config.static_resources.listeners.push(v6);
  return { config, port: listenerPort, port6 };
}

const GENERATED = 330;

describe.runIf(WITH_ENVOY)("envoy-actions.ts agrees with Envoy 1.40 on the shipped envoy.yaml", () => {
  let upstream: EchoUpstream;
  let rls: RecordingRls;
  let envoy: EnvoyProcess;
  let port: number;
  let port6: number | undefined;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    rls = await startRecordingRls();
    const c = await observedConfig(rls.port, upstream.port);
    port = c.port;
    port6 = c.port6;
    envoy = await startEnvoy(c.config);
  });
  beforeEach(() => envoyLogOnFailure(envoy));
  afterAll(async () => {
    await envoy?.stop();
    await rls?.close();
    await upstream?.close();
  });

  it(`${GENERATED} generated requests: Envoy's answer, route, path and descriptors are the model's`, async () => {
    const reqs = generate(GENERATED).map((r, i) => ({ ...r, clientIp: sourceAddress(i) }));
    const differences: { i: number; req: HttpRequest; envoy: Outcome; model: Outcome }[] = [];
    const tally = new Map<string, number>();
    const count = (k: string) => tally.set(k, (tally.get(k) ?? 0) + 1);
    for (const [i, req] of reqs.entries()) {
      const model = predicted(req);
      const { outcome, calls } = await observe({ upstream, rls }, "127.0.0.1", port, req);
      for (const c of calls) expect(c.domain).toBe("edge");
      if (JSON.stringify(outcome) !== JSON.stringify(model)) differences.push({ i, req, envoy: outcome, model });
      count(`status ${model.status}`);
      count(`route ${model.route}`);
      if (model.descriptors.length > 0) count("a call");
      if (req.path.includes("\\")) count("backslash");
      if (/%2f|%5c/i.test(req.path)) count("escaped slash");
      if (/(^|\/|\\)(\.|\.\.|%2e|%2e%2e|\.%2e)(\/|\\|$|\?)/i.test(req.path)) count("dot segment");
      if (/\/\//.test(req.path.split("?")[0])) count("double slash");
      if (req.path.includes("?")) count("query");
      if ("x-forwarded-for" in (req.headers ?? {})) count("x-forwarded-for");
      for (const h of Object.keys(HEADERS)) {
        const present = Object.keys(req.headers ?? {}).some((k) => k.toLowerCase() === h);
        count(`${h} ${present ? "present" : "absent"}`);
      }
    }
    expect(differences).toEqual([]);
    expect(rls.calls.length).toBe(tally.get("a call"));
    // The generator reaches every part of the model: redirects, refusals, each route, each header both ways.
    for (const k of ["status 307", "status 400", "route login", "route search", "route default", "backslash", "escaped slash", "dot segment", "double slash"])
      expect(tally.get(k) ?? 0, k).toBeGreaterThanOrEqual(10);
    for (const h of [...Object.keys(HEADERS), "x-forwarded-for"])
      expect(tally.get(h === "x-forwarded-for" ? h : `${h} present`) ?? 0, h).toBeGreaterThanOrEqual(50);
    console.log(`envoy-oracle: ${reqs.length} generated requests, ${differences.length} differences; ${JSON.stringify(Object.fromEntries([...tally].sort()))}`);
  }, 120_000);

  it("the table of test/helpers/envoy-edge-rows.ts holds for Envoy itself (IPv6 on ::1)", async () => {
    const differences: Obj[] = [];
    for (const [i, row] of EDGE_ROWS.entries()) {
      const v6 = row.req.clientIp.includes(":");
      if (v6 && port6 === undefined) continue;
      const source = v6 ? "::1" : `127.2.0.${i + 1}`;
      const req = { ...row.req, clientIp: source };
      const swap = (v: string) => (v === row.req.clientIp ? source : v);
      const stated: Outcome = {
        status: row.reply?.status ?? 200,
        ...(row.reply?.location === undefined ? {} : { location: row.reply.location }),
        route: row.route,
        ...(row.reply ? {} : { path: edge.call(req).path }),
        descriptors: row.descriptors.map((d) => d.map(([k, v]): [string, string] => [k, swap(v)])),
      };
      const { outcome } = await observe({ upstream, rls }, v6 ? "::1" : "127.0.0.1", v6 ? port6! : port, req);
      if (JSON.stringify(outcome) !== JSON.stringify(stated)) differences.push({ row: row.name, envoy: outcome, table: stated });
    }
    expect(differences).toEqual([]);
  });
});

// ---- a sample through Envoy into a real sluice: what it counts is what the model says Envoy sends ----

/** The store keys a request's descriptors are counted under, as `sluice explain` prints them (secret keys' values hashed as serve's defaults hash them). */
function keysOf(rules: Parameters<typeof explain>[0], req: HttpRequest, nowMs: number): string[] {
  const descriptors = edge.descriptors(req).map((d) => d.map(([key, value]) => ({ key, value })));
  if (descriptors.length === 0) return [];
  const secrets = new SecretValues([...SETTINGS.TOP_SECRET_KEYS.default], SETTINGS.TOP_HASH_KEY.default);
  secrets.learn(rules);
  const text = explain(rules, "edge", descriptors, nowMs, "", false, secrets);
  return [...text.matchAll(/^\s+key: (\S+)/gm)].map((m) => m[1]);
}

describe.runIf(WITH_ENVOY)("a sample through Envoy into sluice on Redis", () => {
  let redis: RedisProcess;
  let sluice: SluiceProcess;
  let upstream: EchoUpstream;
  let envoy: EnvoyProcess;
  let port: number;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startEchoUpstream();
    sluice = await startSluice(["--config", path.join(ROOT, "config"), "--redis", redis.url]);
    const c = await shippedEnvoyConfig({ sluicePorts: [sluice.port], appPort: upstream.port });
    port = c.listenerPort;
    envoy = await startEnvoy(c.config);
  });
  beforeEach(() => envoyLogOnFailure(envoy));
  afterAll(async () => {
    await envoy?.stop();
    await sluice?.stop();
    await upstream?.close();
    await redis?.stop();
  });

  it("sluice's counters are the model's descriptors, counted once per request", async () => {
    const loaded = loadRuleDir(path.join(ROOT, "config"), { mergeDomains: false, failureMode: "allow" });
    expect(loaded.errors).toEqual([]);
    const rules = loaded.rules!;
    // Routed requests whose descriptors stay under every limit, so that each is counted (a refused request counts nothing).
    const perDescriptor = new Map<string, number>();
    const CAP = 5; // login_per_account's limit, the smallest
    const sample = generate(GENERATED, 43)
      .map((r, i) => ({ ...r, clientIp: `127.3.${Math.floor(i / 250)}.${(i % 250) + 1}` }))
      .filter((r) => {
        if (predicted(r).status !== 200) return false;
        const ds = edge.descriptors(r).map((d) => JSON.stringify(d));
        if (ds.some((d) => (perDescriptor.get(d) ?? 0) >= CAP && !d.includes("remote_address") && !d.includes("generic_key"))) return false;
        for (const d of ds) perDescriptor.set(d, (perDescriptor.get(d) ?? 0) + 1);
        return true;
      })
      .slice(0, 80);
    expect(sample.length).toBe(80);

    // Sent again in a fresh minute if the first run straddled one: monthly quotas then count each run.
    // Keys are watched as they are written: a one-second window's may expire before a SCAN on a busy host.
    const watch = await watchKeys(redis);
    let runs = 0;
    const { statuses, nowMs } = await inOneMinute(
      8,
      async () => {
        runs++;
        const statuses: number[] = [];
        for (const r of sample) statuses.push((await send("127.0.0.1", port, r, r.clientIp)).status);
        return { statuses, nowMs: Date.now() };
      },
      redisClock(redis),
    );
    expect(statuses).toEqual(Array(sample.length).fill(200));
    expect(await envoy.stat("cluster.app.ratelimit.ok")).toBe(runs * sample.length);
    expect(await envoy.stat("cluster.app.ratelimit.error")).toBe(0);

    const expected = new Map<string, number>();
    for (const r of sample) for (const k of keysOf(rules, r, nowMs)) expected.set(k, (expected.get(k) ?? 0) + 1);
    // Every key sluice wrote is one the model's descriptors lead to, and the other way round.
    await watch.settle();
    watch.close();
    const written = new Set([...watch.keys].filter((k) => k.includes("{edge:")).map(windowBaseKey));
    expect([...written].sort()).toEqual([...expected.keys()].sort());
    // Counts: minute windows and monthly quotas (token buckets and one-second windows hold no plain count).
    const counted: Record<string, number> = {};
    const want: Record<string, number> = {};
    for (const [k, n] of expected) {
      if (/:fw60$/.test(k)) counted[k] = Number(await getWindowCount(redis.cli, k));
      else if (/:q:/.test(k)) counted[k] = Number((await redis.cli("GET", k)).trim()) / runs;
      else continue;
      want[k] = n;
    }
    expect(counted).toEqual(want);
    // A header sent empty is counted under the empty value (one counter for every client sending it so).
    expect(written).toContain("sluice:{edge:account=}:fw60");
    expect(Object.keys(want).length).toBeGreaterThan(40);
  }, 120_000);
});
