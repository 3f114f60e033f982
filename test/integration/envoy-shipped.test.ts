// The shipped pair under Envoy's own binary: envoy/envoy.yaml (only addresses changed) in front of a real
// `sluice serve` on config/, and the answers the README's "Behind Envoy" section promises.
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
    const { statuses, refused, before, after } = await inOneMinute(20, async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 120; i++) statuses.push((await httpGet(port, "/orders", {}, { localAddress: "127.0.0.2" })).status);
      const before = Date.now();
      const refused = await httpGet(port, "/orders", {}, { localAddress: "127.0.0.2" });
      return { statuses, refused, before, after: Date.now() };
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
    // What passed reached the app; the 429 did not.
    expect(upstream.received.filter((r) => r.path === "/orders")).toHaveLength(120);
    // Envoy counts the filter's outcomes under the route's upstream cluster (app), not the rate-limit cluster.
    expect(await envoy.stat("cluster.app.ratelimit.over_limit")).toBe(1);
    expect(await envoy.stat("cluster.app.ratelimit.ok")).toBe(120);
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
});
