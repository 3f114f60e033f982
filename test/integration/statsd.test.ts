// The statsd sink of a real `sluice serve` (memory store) against a real UDP socket standing in for
// statsd: exact counter totals under the reference's names after scripted gRPC calls, tags, packet size,
// and the last flush at shutdown (the reference's variables, a flush interval of an hour).
import dgram from "node:dgram";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient, type WireRequest } from "../helpers/grpc-client.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";

// Token buckets per day: no window boundary inside the test. Capacities 7 and 2: 80 % of them is not a whole
// number, so near_limit is the same whether counted from ceil(80 %) on or past floor(80 %).
const RULES = `
domain: sd
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 7, algorithm: token_bucket}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 2, algorithm: token_bucket}
  - key: tenant
    detailed_metric: true
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}
  - key: client_ip
    value_to_metric: true
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}
`;

interface StatsdServer {
  port: number;
  packets: Buffer[];
  /** Lines that are not `name:N|c`. */
  bad: string[];
  /** name -> sum of the counter values received so far. */
  totals(): Record<string, number>;
  /** Resolves once the totals of these names reach exactly these values (rejects after timeoutMs). */
  waitFor(expected: Record<string, number>, timeoutMs?: number): Promise<void>;
  close(): void;
}

async function statsdServer(): Promise<StatsdServer> {
  const socket = dgram.createSocket("udp4");
  const packets: Buffer[] = [];
  const bad: string[] = [];
  const sums: Record<string, number> = {};
  const waiters = new Set<() => void>();
  socket.on("message", (msg) => {
    packets.push(msg);
    for (const line of msg.toString().split("\n")) {
      const m = /^([^:|]+):(\d+)\|c$/.exec(line);
      if (!m) {
        bad.push(line);
        continue;
      }
      sums[m[1]] = (sums[m[1]] ?? 0) + Number(m[2]);
    }
    for (const w of waiters) w();
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  const reached = (expected: Record<string, number>) => Object.entries(expected).every(([k, v]) => sums[k] === v);
  return {
    port: socket.address().port,
    packets,
    bad,
    totals: () => ({ ...sums }),
    waitFor(expected, timeoutMs = 10_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!reached(expected)) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`statsd totals did not reach ${JSON.stringify(expected)}; got ${JSON.stringify(sums)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => socket.close(),
  };
}

/** Every rule counter of one stats key (with a tag suffix), as the reference names them. */
function ruleStats(key: string, suffix: string, c: { total: number; over?: number; near?: number; within?: number; shadow?: number }) {
  const out: Record<string, number> = {};
  const put = (stat: string, n: number | undefined) => {
    if (n) out[`ratelimit.service.rate_limit.${key}.${stat}${suffix}`] = n;
  };
  put("total_hits", c.total);
  put("over_limit", c.over);
  put("near_limit", c.near);
  put("within_limit", c.within);
  put("shadow_mode", c.shadow);
  return out;
}

describe("statsd sink", () => {
  let sluice: SluiceProcess | undefined;
  let client: RlsClient | undefined;
  let server: StatsdServer | undefined;

  afterEach(async () => {
    client?.close();
    if (sluice && sluice.proc.exitCode === null) await sluice.stop();
    server?.close();
    sluice = undefined;
    client = undefined;
    server = undefined;
  });

  const one = (entries: Record<string, string>) => client!.shouldRateLimit({ domain: "sd", descriptors: [descriptor(entries)] } as WireRequest);

  it("sends the growth of every counter each interval, under the reference's names, with SLUICE_STATSD_TAGS", async () => {
    server = await statsdServer();
    sluice = await startSluice(["--config", ruleDir({ "sd.yaml": RULES })], {
      SLUICE_STATSD: `127.0.0.1:${server.port}`,
      SLUICE_STATSD_FLUSH_MS: "100",
      SLUICE_STATSD_TAGS: "env:test,zone:eu.1",
    });
    client = rlsClient(sluice.port);
    const tags = ".__env=test.__zone=eu_1";

    // user: 7 per day; 8 calls: the 6th and 7th are near the limit, the 8th refused.
    for (let i = 0; i < 7; i++) expect((await one({ user: "a" })).overall_code).toBe(OK);
    expect((await one({ user: "a" })).overall_code).toBe(OVER_LIMIT);
    // trial: shadow limit of 2, 3 calls: the 3rd would be refused and passes (the reference's over_limit counts it).
    for (let i = 0; i < 3; i++) expect((await one({ trial: "t" })).overall_code).toBe(OK);
    for (const t of ["t1", "t2", "t1"]) expect((await one({ tenant: t })).overall_code).toBe(OK);
    for (const ip of ["10.0.0.1", "10.0.0.2", "10.0.0.1"]) expect((await one({ client_ip: ip })).overall_code).toBe(OK);
    await expect(client.shouldRateLimit({ domain: "", descriptors: [descriptor({ user: "a" })] })).rejects.toThrow(/domain/);

    const expected = {
      ...ruleStats("sd.user", tags, { total: 8, over: 1, near: 2, within: 7 }),
      ...ruleStats("sd.trial", tags, { total: 3, over: 1, near: 1, within: 2, shadow: 1 }),
      ...ruleStats("sd.tenant_t1", tags, { total: 2, within: 2 }),
      ...ruleStats("sd.tenant_t2", tags, { total: 1, within: 1 }),
      // value_to_metric: the request's value, the dots of an IPv4 address as '_'.
      ...ruleStats("sd.client_ip_10_0_0_1", tags, { total: 2, within: 2 }),
      ...ruleStats("sd.client_ip_10_0_0_2", tags, { total: 1, within: 1 }),
      [`ratelimit.service.config_load_success${tags}`]: 1,
      [`ratelimit.service.call.should_rate_limit.service_error${tags}`]: 1,
      [`ratelimit_server.ShouldRateLimit.total_requests${tags}`]: 18,
    };
    await server.waitFor(expected);
    // Later flushes, the last one at shutdown included, add nothing: exactly these names and totals.
    expect(await sluice.stop()).toBe(0);
    await new Promise((resolve) => setImmediate(resolve));
    expect(server.totals()).toEqual(expected);
    expect(server.bad).toEqual([]);
    for (const p of server.packets) expect(p.length).toBeLessThanOrEqual(1432);
    expect(server.packets.some((p) => p.includes("\n"))).toBe(true); // lines batched into packets
  });

  it("the reference's variables: USE_STATSD over UDP, EXTRA_TAGS, and the last counts sent at shutdown", async () => {
    server = await statsdServer();
    sluice = await startSluice(["--config", ruleDir({ "sd.yaml": RULES })], {
      USE_STATSD: "true",
      STATSD_HOST: "127.0.0.1",
      STATSD_PORT: String(server.port),
      STATSD_PROTOCOL: "udp",
      STATS_FLUSH_INTERVAL: "1h",
      EXTRA_TAGS: "env:prod",
      SHADOW_MODE: "true",
    });
    client = rlsClient(sluice.port);
    // 7 per day, 8 calls: global shadow mode answers OK to the 8th.
    for (let i = 0; i < 8; i++) expect((await one({ user: "b" })).overall_code).toBe(OK);
    // Nothing before the hour is up; then SIGTERM: the final flush carries everything.
    expect(server.packets.length).toBe(0);
    expect(await sluice.stop()).toBe(0);
    const tags = ".__env=prod";
    const expected = {
      // sluice counts a refusal that global shadow mode let through in shadow_mode too (the reference only in over_limit).
      ...ruleStats("sd.user", tags, { total: 8, over: 1, near: 2, within: 7, shadow: 1 }),
      [`ratelimit.service.config_load_success${tags}`]: 1,
      [`ratelimit.service.global_shadow_mode${tags}`]: 1,
      [`ratelimit_server.ShouldRateLimit.total_requests${tags}`]: 8,
    };
    await server.waitFor(expected);
    expect(server.totals()).toEqual(expected);
    expect(server.bad).toEqual([]);
  });

  it("over TCP (the reference's default protocol): newline-separated lines, the last ones at shutdown", async () => {
    let text = "";
    let onData = () => {};
    const tcp = net.createServer((conn) =>
      conn.on("data", (d) => {
        text += d.toString();
        onData();
      }),
    );
    await new Promise<void>((resolve) => tcp.listen(0, "127.0.0.1", resolve));
    try {
      sluice = await startSluice(["--config", ruleDir({ "sd.yaml": RULES })], {
        SLUICE_STATSD: `127.0.0.1:${(tcp.address() as net.AddressInfo).port}`,
        SLUICE_STATSD_PROTOCOL: "tcp",
        SLUICE_STATSD_FLUSH_MS: "3600000",
      });
      client = rlsClient(sluice.port);
      for (let i = 0; i < 2; i++) expect((await one({ user: "c" })).overall_code).toBe(OK);
      expect(await sluice.stop()).toBe(0);
      const want = "ratelimit_server.ShouldRateLimit.total_requests:2|c\n";
      await new Promise<void>((resolve) => {
        onData = () => text.includes(want) && resolve();
        onData();
      });
      expect(
        text
          .split("\n")
          .filter((l) => l !== "")
          .sort(),
      ).toEqual([
        "ratelimit.service.config_load_success:1|c",
        "ratelimit.service.rate_limit.sd.user.total_hits:2|c",
        "ratelimit.service.rate_limit.sd.user.within_limit:2|c",
        "ratelimit_server.ShouldRateLimit.total_requests:2|c",
      ]);
    } finally {
      tcp.close();
    }
  });
});
