// The shipped pair under Envoy's own binary: envoy/envoy.yaml (only addresses changed) in front of a real
// `sluice serve` on config/, and the answers the README's "Behind Envoy" section and docs/operating.md's
// "Run behind Envoy" promise: the curl examples, and each layer of its table once (sluice's side of each
// layer, at scale, is test/integration/envoy-edge.test.ts; the descriptors Envoy sends for every kind of
// path are test/integration/envoy-oracle.test.ts). Each client is its own loopback address (127.0.x.y).
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  envoyAvailable,
  envoyLogOnFailure,
  httpGet,
  shippedEnvoyConfig,
  startEchoUpstream,
  startEnvoy,
  type EchoUpstream,
  type EnvoyProcess,
} from "../helpers/envoy.js";
import { inOneMinute } from "../helpers/minute.js";
import { sleep } from "../helpers/wait.js";
import { ROOT, startSluice, type SluiceProcess } from "../helpers/sluice.js";

describe.runIf(envoyAvailable(import.meta.filename))("the shipped envoy.yaml and config/ under a real Envoy 1.40", () => {
  let sluice: SluiceProcess;
  let upstream: EchoUpstream;
  let envoy: EnvoyProcess;
  let port: number;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    sluice = await startSluice(["--config", path.join(ROOT, "config")]);
    const { config, listenerPort } = await shippedEnvoyConfig({ sluicePorts: [sluice.port], appPort: upstream.port });
    port = listenerPort;
    envoy = await startEnvoy(config);
  });
  beforeEach(() => envoyLogOnFailure(envoy));
  afterAll(async () => {
    await envoy?.stop();
    await sluice?.stop();
    await upstream?.close();
  });

  it("runs without a deprecation warning", () => {
    expect(envoy.log()).not.toMatch(/deprecated/i);
  });

  it("120 requests from one client pass, the 121st gets 429 with x-envoy-ratelimited, Retry-After, the RateLimit headers and the JSON body", async () => {
    // A new x-forwarded-for on each request changes nothing: Envoy counts the TCP peer.
    const fromOne = (i: number) => httpGet(port, "/orders", { "x-forwarded-for": `10.0.0.${i}` }, { localAddress: "127.0.0.2" });
    let runs = 0; // 2 when the first run straddled a minute and was sent again in a fresh one
    const { statuses, refused, again, before, after } = await inOneMinute(20, async () => {
      runs++;
      const statuses: number[] = [];
      for (let i = 0; i < 120; i++) statuses.push((await fromOne(i)).status);
      const before = Date.now();
      const refused = await fromOne(120);
      const again = await fromOne(121); // `curl -i`: still 429 until the minute ends
      return { statuses, refused, again, before, after: Date.now() };
    });
    expect(statuses).toEqual(Array(120).fill(200));
    expect(refused.status).toBe(429);
    expect(refused.headers["x-envoy-ratelimited"]).toBe("true");
    const secs = Number(refused.headers["retry-after"]);
    expect(secs).toBeGreaterThanOrEqual(Math.max(1, Math.ceil(60 - ((after / 1000) % 60))));
    expect(secs).toBeLessThanOrEqual(Math.ceil(60 - ((before / 1000) % 60)));
    expect(refused.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(refused.body)).toEqual({ error: "rate_limited", retry_after_seconds: secs });
    // DRAFT_VERSION_03 headers from the statuses sluice filled in: the per-IP limit, nothing left, the reset.
    expect(refused.headers["x-ratelimit-limit"]).toBe('120, 120;w=60;name="per_ip"');
    expect(refused.headers["x-ratelimit-remaining"]).toBe("0");
    expect(Number(refused.headers["x-ratelimit-reset"])).toBe(secs);
    expect(again.status).toBe(429);
    expect(again.headers["x-ratelimit-limit"]).toBe('120, 120;w=60;name="per_ip"');
    // What passed reached the app; the 429 did not.
    expect(upstream.received.filter((r) => r.path === "/orders")).toHaveLength(runs * 120);
    // Envoy counts the filter's outcomes under the route's upstream cluster (app), not the rate-limit cluster.
    expect(await envoy.stat("cluster.app.ratelimit.over_limit")).toBe(runs * 2);
    expect(await envoy.stat("cluster.app.ratelimit.ok")).toBe(runs * 120);
    expect(await envoy.stat("cluster.app.ratelimit.error")).toBe(0);
  }, 120_000);

  it("an allowed request carries the RateLimit headers of its tightest limit", async () => {
    const ok = await httpGet(port, "/orders", { "x-api-key": "key-headers", "x-plan": "free" }, { localAddress: "127.0.0.3" });
    expect(ok.status).toBe(200);
    // Envoy reports the status with the least remaining first: the free key's bucket (burst 20, 2 a second)
    // with 19 left, then every limit as quota policies.
    expect(ok.headers["x-ratelimit-remaining"]).toBe("19");
    expect(ok.headers["x-ratelimit-limit"]).toBe('2, 120;w=60;name="per_ip", 2;w=1;name="per_api_key", 10000;w=2592000;name="free_monthly"');
  });
  it("docs: the 6th login attempt at one account in a minute is a 429, from any IP; another account is not", async () => {
    const attempt = (account: string, n: number) => httpGet(port, "/login", { "x-login-account": account }, { method: "POST", localAddress: `127.0.1.${n}` });
    const { statuses, sixth, elsewhere, bob } = await inOneMinute(15, async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push((await attempt("alice", 1)).status);
      return { statuses, sixth: await attempt("alice", 1), elsewhere: await attempt("alice", 2), bob: await attempt("bob", 1) };
    });
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    for (const refused of [sixth, elsewhere]) {
      expect(refused.status).toBe(429);
      expect(refused.headers["x-envoy-ratelimited"]).toBe("true");
      expect(refused.headers["x-ratelimit-limit"]).toBe('5, 120;w=60;name="per_ip", 5;w=60;name="login_per_account"');
      expect(Number(refused.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    }
    expect(bob.status).toBe(200);
  });

  it("docs: one account from 121 IPs gets 120 requests a minute, then a 429 naming per_account", async () => {
    const asAccount = (n: number) => httpGet(port, "/orders", { "x-account-id": "acct-docs" }, { localAddress: `127.0.2.${n}` });
    const { statuses, refused } = await inOneMinute(20, async () => {
      const statuses: number[] = [];
      for (let i = 1; i <= 120; i++) statuses.push((await asAccount(i)).status);
      return { statuses, refused: await asAccount(121) };
    });
    expect(statuses).toEqual(Array(120).fill(200));
    expect(refused.status).toBe(429);
    expect(refused.headers["x-ratelimit-limit"]).toBe('120, 120;w=60;name="per_ip", 120;w=60;name="per_account"');
  }, 120_000);

  it("docs: an API key bursts 20 from any IPs, then its bucket answers 429 with Retry-After 1", async () => {
    const answers = await Promise.all(
      Array.from({ length: 21 }, (_, i) => httpGet(port, "/orders", { "x-api-key": "key-docs" }, { localAddress: `127.0.3.${i + 1}` })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(20).fill(200), 429]);
    const refused = answers.find((a) => a.status === 429)!;
    expect(refused.headers["retry-after"]).toBe("1");
    expect(refused.headers["x-ratelimit-limit"]).toBe('2, 120;w=60;name="per_ip", 2;w=1;name="per_api_key"');
  });

  it("docs: a pro key gets 20 a second instead of the bucket, in every second", async () => {
    // Two bursts, each inside one second (this sluice's memory store counts by this host's clock): 25 then 20.
    // The bucket alone would refuse most of the second burst; plan_pro replaces it.
    const burst = (key: string, n: number, base: number) =>
      Promise.all(
        Array.from({ length: n }, (_, i) => httpGet(port, "/orders", { "x-api-key": key, "x-plan": "pro" }, { localAddress: `127.0.4.${base + i}` })),
      );
    const inOneSecond = async <T>(f: () => Promise<T>): Promise<T | undefined> => {
      await sleep(1000 - (Date.now() % 1000) + 20);
      const second = Math.floor(Date.now() / 1000);
      const result = await f();
      return Math.floor(Date.now() / 1000) === second ? result : undefined;
    };
    for (let attempt = 0; attempt < 3; attempt++) {
      const key = `key-pro-${attempt}`;
      const first = await inOneSecond(() => burst(key, 25, 1 + attempt * 80));
      const second = await inOneSecond(() => burst(key, 20, 41 + attempt * 80));
      if (!first || !second) continue; // a loaded host let a burst straddle a second: again with a fresh key
      expect(first.map((a) => a.status).sort()).toEqual([...Array(20).fill(200), ...Array(5).fill(429)]);
      // One status per descriptor, the tighter of its limits: plan_pro this second, not pro_monthly.
      expect(first.find((a) => a.status === 429)!.headers["x-ratelimit-limit"]).toBe('20, 120;w=60;name="per_ip", 20;w=1;name="plan_pro"');
      expect(second.map((a) => a.status)).toEqual(Array(20).fill(200));
      return;
    }
    throw new Error("three attempts straddled a second boundary");
  }, 60_000);
});
