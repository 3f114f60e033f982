// envoy/rlqs.yaml as shipped (only addresses changed) under Envoy 1.40, in front of a real `sluice serve` on
// config/'s rules (per_ip raised: every request here comes from one address, and a new bucket's first lease is
// sized for a quarter of the rule's rate until Envoy's next report, 5 s later, shows the demand): the config loads without an error or a deprecation, each route opens the buckets envoy.yaml's
// descriptors name (on one stream: the rate_limit_quota filters share it), and a bucket at its rule's limit is denied.
import fs from "node:fs";
import path from "node:path";
import { parse } from "yaml";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  envoyAvailable,
  envoyLogOnFailure,
  httpGet,
  pointCluster,
  pointListener,
  startEchoUpstream,
  startEnvoy,
  type EchoUpstream,
  type EnvoyProcess,
} from "../helpers/envoy.js";
import { inOneMinute } from "../helpers/minute.js";
import { freePort } from "../helpers/ports.js";
import { ROOT, ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep, until } from "../helpers/wait.js";

/** sluice's RLQS metrics (sluice_rlqs_*) by name. */
async function rlqsMetrics(adminPort: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const m = /^(sluice_rlqs_\w+) (\S+)$/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

describe.runIf(envoyAvailable(import.meta.filename))("the shipped envoy/rlqs.yaml and config/ under a real Envoy 1.40", () => {
  let sluice: SluiceProcess;
  let upstream: EchoUpstream;
  let envoy: EnvoyProcess;
  let port: number;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    const edge = fs.readFileSync(path.join(ROOT, "config/edge.yaml"), "utf8");
    const rules = edge.replace(
      "name: per_ip\n      unit: minute\n      requests_per_unit: 120",
      "name: per_ip\n      unit: minute\n      requests_per_unit: 100000",
    );
    expect(rules).not.toBe(edge);
    sluice = await startSluice(["--config", ruleDir({ "edge.yaml": rules })]);
    const config = parse(fs.readFileSync(path.join(ROOT, "envoy/rlqs.yaml"), "utf8"));
    port = await freePort();
    pointListener(config, "edge", port);
    pointCluster(config, "sluice", [sluice.port]);
    pointCluster(config, "app", [upstream.port]);
    envoy = await startEnvoy(config, { concurrency: 1 });
  });
  beforeEach(() => envoyLogOnFailure(envoy));
  afterAll(async () => {
    await envoy?.stop();
    await sluice?.stop();
    await upstream?.close();
  });

  it("loads without an error or a deprecation warning", () => {
    expect(envoy.log()).not.toMatch(/deprecated/i);
    expect(envoy.log()).not.toMatch(/\]\[(error|critical)\]/);
  });

  it("each route's requests open the buckets of envoy.yaml's descriptors on it, on one stream", async () => {
    // Plan free: pro's 20 a second is a per-second window, which RLQS cannot lease (docs/rlqs.md, "Not done yet").
    const creds = { "x-account-id": "acct-1", "x-api-key": "key-1", "x-plan": "free" };
    expect((await httpGet(port, "/orders", creds)).status).toBe(200);
    // remote_address, account, api_key, {api_key, plan}: four filters, a bucket each, all on Envoy's one stream
    // (Envoy 1.40 shares it between filters of the same server).
    await until(async () => (await rlqsMetrics(sluice.adminPort)).sluice_rlqs_buckets === 4, 10_000, "four buckets for /orders");
    expect((await rlqsMetrics(sluice.adminPort)).sluice_rlqs_streams_open).toBe(1);
    // /search adds {generic_key: search}; /login {login_account} and no account or API key bucket.
    expect((await httpGet(port, "/search", creds)).status).toBe(200);
    expect((await httpGet(port, "/login", { ...creds, "x-account-id": "acct-2", "x-login-account": "alice" })).status).toBe(200);
    await until(
      async () => (await rlqsMetrics(sluice.adminPort)).sluice_rlqs_buckets === 6,
      10_000,
      "six buckets, one each for /orders, /search and /login's attributes",
    );
    const m = await rlqsMetrics(sluice.adminPort);
    expect(m.sluice_rlqs_streams_open).toBe(1);
    expect(m.sluice_rlqs_assignments_total).toBeGreaterThanOrEqual(6);
    // A header sent empty puts the request in no bucket (the filter's matcher wants a value).
    expect((await httpGet(port, "/orders", { "x-account-id": "" })).status).toBe(200);
    await sleep(300);
    expect((await rlqsMetrics(sluice.adminPort)).sluice_rlqs_buckets).toBe(6);
  }, 30_000);

  it("login_per_account (5 a minute): logins at one account get 429 once its leased units are spent, never more than 5 and the one before its first assignment", async () => {
    const login = () => httpGet(port, "/login", { "x-login-account": "bob" });
    const statuses = await inOneMinute(12, async () => {
      const before = (await rlqsMetrics(sluice.adminPort)).sluice_rlqs_assignments_total;
      // The bucket's first request passes on no_assignment_behavior (ALLOW_ALL) and asks sluice for a lease.
      const out = [(await login()).status];
      await until(async () => (await rlqsMetrics(sluice.adminPort)).sluice_rlqs_assignments_total > before, 10_000, "an assignment for bob's bucket");
      await sleep(100); // the assignment's transit to Envoy
      for (let i = 0; i < 12; i++) {
        out.push((await login()).status);
        await sleep(100);
      }
      return out;
    });
    expect(statuses[0], statuses.join(" ")).toBe(200);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    const admitted = statuses.filter((s) => s === 200).length;
    // At most the 5 units leased plus the one request before the first assignment; at least the first lease's.
    expect(admitted, statuses.join(" ")).toBeLessThanOrEqual(6);
    expect(admitted, statuses.join(" ")).toBeGreaterThanOrEqual(2);
    expect(statuses).toContain(429);
    // Envoy reports the denied requests (every 5 s): sluice counts them.
    await until(
      async () => (await rlqsMetrics(sluice.adminPort)).sluice_rlqs_denied_reported_total >= statuses.filter((s) => s === 429).length,
      12_000,
      "the denied logins reported",
    );
  }, 45_000);
});
