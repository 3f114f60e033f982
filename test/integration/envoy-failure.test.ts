// Failure as Envoy 1.40 sees it: each way sluice can fail (stopped, black-holed, slower than the filter's
// timeout, its Redis down under each rule failure_mode) behind the rate-limit filter with failure_mode_deny false
// and true. For each: the client's statuses and headers, Envoy's own cluster.<route's cluster>.ratelimit.* stats,
// and sluice's metrics, exactly; then docs/operating.md's table is checked against the same rows.
// One Envoy per failure_mode_deny value: one rate-limit filter per failure (disabled by default, enabled on that
// failure's route), each calling its own cluster and routing to its own copy of the app cluster, so that every
// failure has its own stats.
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  envoyAvailable,
  envoyLogOnFailure,
  httpGet,
  rateLimitEnvoyConfig,
  startEchoUpstream,
  startEnvoy,
  type EchoUpstream,
  type EnvoyProcess,
  type HttpAnswer,
} from "../helpers/envoy.js";
import { freePort } from "../helpers/ports.js";
import { sampleValue, scrape, type Sample } from "../helpers/prom.js";
// A TCP fault proxy that takes any port (named for Redis, where it was first used): here in front of sluice.
import { startRedisGate, type RedisGate } from "../helpers/redis-gate.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ROOT, ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

/** Requests per failure and filter setting; limits are 2, so a counting answer shows both sides. */
const N = 4;
/** The filter's timeout: generous for a busy host (sluice on a dead Redis answers in ms), well under SLOW_MS. */
const TIMEOUT_S = 0.5;
/** What the slow proxy adds to every chunk, each way. */
const SLOW_MS = 1500;
const FMD = [false, true] as const;

type Target = "healthy" | "stopped" | "blackhole" | "slow" | "redisDown";
const STATS = ["ok", "over_limit", "error", "failure_mode_allowed"] as const;
type Stats = Partial<Record<(typeof STATS)[number], number>>;

interface Side {
  statuses: number[];
  envoy: Stats;
}

interface Row {
  id: string;
  /** The docs table's first two columns. */
  failure: string;
  answer: string;
  target: Target;
  /** The rule's failure_mode (the store's failure is answered by it). */
  failureMode: "allow" | "deny" | "local" | "error";
  open: Side; // failure_mode_deny: false
  closed: Side; // failure_mode_deny: true
  /** sluice's metrics for this row's domain: decisions by code, failure policy answers by mode, gRPC errors. */
  sluice: { decisions?: { OK?: number; OVER_LIMIT?: number }; policy?: Partial<Record<"allow" | "deny" | "local", number>>; unavailable?: number };
  /** Also said in the sluice column (what the metrics cannot show). */
  note?: string;
}

const allowed = (n: number): Side => ({ statuses: Array(n).fill(200), envoy: { error: n, failure_mode_allowed: n } });
const refused500 = (n: number): Side => ({ statuses: Array(n).fill(500), envoy: { error: n } });
const counted: Side = { statuses: [200, 200, 429, 429], envoy: { ok: 2, over_limit: 2 } };

const ROWS: Row[] = [
  {
    id: "healthy",
    failure: "none (Redis up)",
    answer: "OK, then OVER_LIMIT",
    target: "healthy",
    failureMode: "allow",
    open: counted,
    closed: counted,
    sluice: { decisions: { OK: 2, OVER_LIMIT: 2 } },
  },
  {
    id: "stopped",
    failure: "sluice stopped (connection refused)",
    answer: "nothing: the call fails at once",
    target: "stopped",
    failureMode: "allow",
    open: allowed(N),
    closed: refused500(N),
    sluice: {},
    note: "nothing (not running)",
  },
  {
    id: "blackhole",
    failure: "sluice black-holed (connects, never answers)",
    answer: "nothing: the filter's `timeout` ends the call",
    target: "blackhole",
    failureMode: "allow",
    open: allowed(N),
    closed: refused500(N),
    sluice: {},
    note: "nothing (no call arrives)",
  },
  {
    id: "slow",
    failure: "sluice slower than the filter's `timeout`",
    answer: "OK, too late: the filter's `timeout` ends the call",
    target: "slow",
    failureMode: "allow",
    open: allowed(N),
    closed: refused500(N),
    sluice: { decisions: { OK: 2, OVER_LIMIT: 2 } },
    note: "each call decided and counted after Envoy gave up on it",
  },
  {
    id: "allow",
    failure: "Redis down, rule `failure_mode: allow`",
    answer: "OK",
    target: "redisDown",
    failureMode: "allow",
    open: { statuses: Array(N).fill(200), envoy: { ok: N } },
    closed: { statuses: Array(N).fill(200), envoy: { ok: N } },
    sluice: { decisions: { OK: N }, policy: { allow: N } },
  },
  {
    id: "deny",
    failure: "Redis down, rule `failure_mode: deny`",
    answer: "OVER_LIMIT, Retry-After 1",
    target: "redisDown",
    failureMode: "deny",
    open: { statuses: Array(N).fill(429), envoy: { over_limit: N } },
    closed: { statuses: Array(N).fill(429), envoy: { over_limit: N } },
    sluice: { decisions: { OVER_LIMIT: N }, policy: { deny: N } },
  },
  {
    id: "local",
    failure: "Redis down, rule `failure_mode: local`",
    answer: "OK, then OVER_LIMIT (counted in sluice's memory)",
    target: "redisDown",
    failureMode: "local",
    open: counted,
    closed: counted,
    sluice: { decisions: { OK: 2, OVER_LIMIT: 2 }, policy: { local: N } },
  },
  {
    id: "error",
    failure: "Redis down, rule `failure_mode: error`",
    answer: "gRPC UNAVAILABLE",
    target: "redisDown",
    failureMode: "error",
    open: allowed(N),
    closed: refused500(N),
    sluice: { unavailable: N },
  },
];

const domainOf = (row: Row, fmd: boolean) => `${row.id}_${fmd ? "deny" : "allow"}`;

/** One rule file per row and filter setting: a limit of 2 an hour on generic_key=v, with the row's failure_mode. */
function rules(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const row of ROWS) {
    for (const fmd of FMD) {
      const domain = domainOf(row, fmd);
      files[`${domain}.yaml`] =
        `domain: ${domain}\ndescriptors:\n  - key: generic_key\n    value: v\n` +
        `    failure_mode: ${row.failureMode}\n    rate_limit: {unit: hour, requests_per_unit: 2}\n`;
    }
  }
  return files;
}

// ---- rendering: the docs table is these rows, as text ----

function runs(statuses: number[]): string {
  const out: string[] = [];
  for (let i = 0; i < statuses.length; ) {
    let j = i;
    while (j < statuses.length && statuses[j] === statuses[i]) j++;
    out.push(`${statuses[i]} ×${j - i}`);
    i = j;
  }
  return out.join(", ");
}

function statsText(s: Stats): string {
  return STATS.filter((k) => (s[k] ?? 0) > 0)
    .map((k) => `\`${k}\` ${s[k]}`)
    .join(", ");
}

function sluiceText(row: Row): string {
  const parts: string[] = [];
  const d = row.sluice.decisions;
  if (d)
    parts.push(
      `decisions ${["OK", "OVER_LIMIT"]
        .filter((c) => d[c as "OK"])
        .map((c) => `${c} ${d[c as "OK"]}`)
        .join(", ")}`,
    );
  const p = row.sluice.policy;
  if (p)
    parts.push(
      `failure policy ${Object.entries(p)
        .map(([m, n]) => `${m} ${n}`)
        .join(", ")}`,
    );
  if (row.sluice.unavailable) parts.push(`request errors unavailable ${row.sluice.unavailable}`);
  if (row.note) parts.push(row.note);
  return parts.join("; ");
}

function renderRow(row: Row): string[] {
  return [row.failure, row.answer, runs(row.open.statuses), statsText(row.open.envoy), runs(row.closed.statuses), statsText(row.closed.envoy), sluiceText(row)];
}

/** The rows of the first table under the docs section `heading` (its header and rule lines dropped). */
function docsTableRows(file: string, heading: string): string[] {
  const text = fs.readFileSync(file, "utf8");
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${file}: no section "${heading}"`);
  const lines = text.slice(start + heading.length + 2).split("\n");
  const table: string[] = [];
  for (let i = lines.findIndex((l) => l.startsWith("|")); i >= 0 && i < lines.length && lines[i].startsWith("|"); i++) table.push(lines[i].trim());
  return table.slice(2);
}

// ---- the Envoy config: one filter, cluster and app cluster per row ----

const TYPE_RATELIMIT = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit";
const TYPE_PER_ROUTE = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute";
const TYPE_HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

async function failureEnvoyConfig(fmd: boolean, ports: Record<string, number>, appPort: number) {
  const { config, listenerPort } = await rateLimitEnvoyConfig({ sluicePorts: [ports.healthy], appPort, filter: { failure_mode_deny: fmd } });
  const hcm = config.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const router = hcm.http_filters.at(-1);
  const cluster = (name: string, port: number, h2: boolean) => ({
    name,
    type: "STATIC",
    connect_timeout: "1s",
    ...(h2
      ? {
          typed_extension_protocol_options: {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": { "@type": TYPE_HTTP_OPTIONS, explicit_http_config: { http2_protocol_options: {} } },
          },
        }
      : {}),
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: port } } } }] }],
    },
  });
  hcm.http_filters = [
    ...ROWS.map((row) => ({
      name: `rl_${row.id}`,
      disabled: true,
      typed_config: {
        "@type": TYPE_RATELIMIT,
        domain: domainOf(row, fmd),
        failure_mode_deny: fmd,
        timeout: `${TIMEOUT_S}s`,
        rate_limit_service: { grpc_service: { envoy_grpc: { cluster_name: `rls_${row.id}` } }, transport_api_version: "V3" },
      },
    })),
    router,
  ];
  hcm.route_config.virtual_hosts[0].routes = ROWS.map((row) => ({
    match: { prefix: `/${row.id}/` },
    route: { cluster: `app_${row.id}`, rate_limits: [{ actions: [{ generic_key: { descriptor_value: "v" } }] }] },
    // A valid per-route config enables a filter that is disabled by default (an empty one is refused).
    typed_per_filter_config: { [`rl_${row.id}`]: { "@type": TYPE_PER_ROUTE, vh_rate_limits: "INCLUDE" } },
  }));
  config.static_resources.clusters = ROWS.flatMap((row) => [cluster(`rls_${row.id}`, ports[row.id], true), cluster(`app_${row.id}`, appPort, false)]);
  return { config, listenerPort };
}

// ---- measuring ----

interface Measured {
  answers: HttpAnswer[];
  envoy: Stats;
  sluice: Row["sluice"];
}

function sluiceFigures(samples: Sample[], domain: string, unavailableBefore: number): Row["sluice"] {
  const out: Row["sluice"] = {};
  const ok = sampleValue(samples, "sluice_decisions_total", { domain, code: "OK" }) ?? 0;
  const over = sampleValue(samples, "sluice_decisions_total", { domain, code: "OVER_LIMIT" }) ?? 0;
  if (ok + over > 0) out.decisions = { ...(ok ? { OK: ok } : {}), ...(over ? { OVER_LIMIT: over } : {}) };
  const policy: Record<string, number> = {};
  for (const s of samples) {
    if (s.name === "sluice_rule_failure_policy_decisions_total" && s.labels.domain === domain) policy[s.labels.mode] = (policy[s.labels.mode] ?? 0) + s.value;
  }
  if (Object.keys(policy).length > 0) out.policy = policy;
  const unavailable = (sampleValue(samples, "sluice_request_errors_total", { code: "unavailable" }) ?? 0) - unavailableBefore;
  if (unavailable > 0) out.unavailable = unavailable;
  return out;
}

describe.runIf(envoyAvailable(import.meta.filename))("failure as a real Envoy 1.40 sees it", () => {
  let redis: RedisProcess;
  let deadRedis: RedisProcess;
  let healthy: SluiceProcess;
  let cutOff: SluiceProcess;
  let blackhole: RedisGate;
  let slow: RedisGate;
  let upstream: EchoUpstream;
  const envoys = new Map<boolean, { envoy: EnvoyProcess; port: number }>();
  const sluiceOf: Partial<Record<Target, SluiceProcess>> = {};

  beforeAll(async () => {
    const dir = ruleDir(rules());
    const noTop = { SLUICE_TOP: "off" };
    [redis, deadRedis, upstream] = await Promise.all([startRedis(), startRedis(), startEchoUpstream()]);
    [healthy, cutOff] = await Promise.all([
      startSluice(["--config", dir, "--redis", redis.url], noTop),
      startSluice(["--config", dir, "--redis", deadRedis.url], noTop),
    ]);
    // Redis down: the process ended, so sluice's connection is refused (each limit's failure_mode answers).
    await deadRedis.stop();
    await until(
      async () => {
        const r = await fetch(`http://127.0.0.1:${cutOff.adminPort}/readyz`).then((x) => x.json());
        return r.store.nodes.every((n: { state: string }) => n.state !== "up");
      },
      10_000,
      () => "sluice did not see its Redis go down",
    );
    [blackhole, slow] = await Promise.all([startRedisGate(healthy.port), startRedisGate(healthy.port)]);
    blackhole.blackhole();
    slow.latency(SLOW_MS);
    Object.assign(sluiceOf, { healthy, slow: healthy, redisDown: cutOff });
    const portOf: Record<Target, number> = {
      healthy: healthy.port,
      stopped: await freePort(),
      blackhole: blackhole.port,
      slow: slow.port,
      redisDown: cutOff.port,
    };
    const ports = Object.fromEntries(ROWS.map((r) => [r.id, portOf[r.target]]));
    for (const fmd of FMD) {
      const { config, listenerPort } = await failureEnvoyConfig(fmd, ports, upstream.port);
      envoys.set(fmd, { envoy: await startEnvoy(config), port: listenerPort });
    }
  }, 60_000);
  beforeEach(() => envoyLogOnFailure(...[...envoys.values()].map((e) => e.envoy)));
  afterAll(async () => {
    for (const { envoy } of envoys.values()) await envoy.stop();
    await blackhole?.close();
    await slow?.close();
    await healthy?.stop();
    await cutOff?.stop();
    await redis?.stop();
    await upstream?.close();
  });

  async function measure(row: Row, fmd: boolean): Promise<Measured> {
    const { envoy, port } = envoys.get(fmd)!;
    const sluice = sluiceOf[row.target];
    const before = sluice ? (sampleValue(await scrape(sluice.adminPort), "sluice_request_errors_total", { code: "unavailable" }) ?? 0) : 0;
    const want = fmd ? row.closed : row.open;
    const get = (i: number) => httpGet(port, `/${row.id}/${fmd}/${i}`);
    const answers: HttpAnswer[] = [];
    // Where every request gets the same answer they go at once (a black hole or a slow sluice makes each wait the
    // filter's timeout); where a count decides, one after another.
    if (new Set(want.statuses).size === 1) answers.push(...(await Promise.all(Array.from({ length: N }, (_, i) => get(i)))));
    else for (let i = 0; i < N; i++) answers.push(await get(i));
    const envoyStats: Stats = {};
    for (const k of STATS) {
      const v = await envoy.stat(`cluster.app_${row.id}.ratelimit.${k}`);
      if (v > 0) envoyStats[k] = v;
    }
    let figures: Row["sluice"] = {};
    if (sluice) {
      const wanted = row.sluice;
      // The slow proxy delivers the calls after Envoy gave up: wait until sluice decided them all.
      await until(
        async () => {
          figures = sluiceFigures(await scrape(sluice.adminPort), domainOf(row, fmd), before);
          return JSON.stringify(figures) === JSON.stringify(wanted);
        },
        row.target === "slow" ? 15_000 : 2_000,
        () => `sluice's metrics for ${domainOf(row, fmd)}: ${JSON.stringify(figures)}`,
      ).catch(() => undefined); // the assertion below says what differs
    }
    return { answers, envoy: envoyStats, sluice: figures };
  }

  describe.each(ROWS)("$failure", (row) => {
    it.each(FMD)(
      "failure_mode_deny: %s",
      async (fmd) => {
        const m = await measure(row, fmd);
        const want = fmd ? row.closed : row.open;
        expect(m.answers.map((a) => a.status)).toEqual(want.statuses);
        expect(m.envoy).toEqual(want.envoy);
        expect(m.sluice).toEqual(row.sluice);
        for (const a of m.answers) {
          // Envoy marks its 429s (and adds sluice's Retry-After); a refusal for a failed call is not a rate limit.
          if (a.status === 429) {
            expect(a.headers["x-envoy-ratelimited"]).toBe("true");
            expect(Number(a.headers["retry-after"])).toBeGreaterThanOrEqual(1);
            if (row.id === "deny") expect(a.headers["retry-after"]).toBe("1");
          } else {
            expect(a.headers["x-envoy-ratelimited"]).toBeUndefined();
          }
        }
        // Only what Envoy let through reached the app.
        const reached = upstream.received.filter((r) => r.path.startsWith(`/${row.id}/${fmd}/`)).length;
        expect(reached).toBe(want.statuses.filter((s) => s === 200).length);
      },
      30_000,
    );
  });

  it("docs/operating.md's table says what was measured", () => {
    const rows = docsTableRows(path.join(ROOT, "docs/operating.md"), "## What Envoy does when sluice fails");
    expect(rows).toEqual(ROWS.map((r) => `| ${renderRow(r).join(" | ")} |`));
  });
});
