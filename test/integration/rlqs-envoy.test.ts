// RLQS with Envoy 1.40's own rate_limit_quota filter: three Envoys, two sluice instances on one Redis, one
// bucket limited to 600 a minute, uneven load (about 100, 30 and 10 requests a second: 10x, 3x, 1x, far over
// the limit). Per minute window (fixed windows by Redis's clock, here the host's) the Envoys together admit at
// most 600, and in the first window the load fully covers at least 540 (the load then lasted more than one
// reporting interval, which Envoy 1.40 fixes at 5 s); the more an Envoy is asked, the more it admits.
// A minute, not a second: Envoy reads an assignment's time to live in whole seconds, so a per-second window
// cannot hold a lease that ends before it does (docs/rlqs.md).
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { envoyAvailable, envoyLogOnFailure, startEchoUpstream, startEnvoy, type EnvoyProcess } from "../helpers/envoy.js";
import { rlqsEnvoyConfig } from "../helpers/rlqs-envoy.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { startRedis } from "../helpers/redis-server.js";
import { sleep, until } from "../helpers/wait.js";

const RULES = "domain: edge\ndescriptors:\n  - key: name\n    value: api\n    rate_limit: {unit: minute, requests_per_unit: 600}\n";
const open: { close(): Promise<unknown> | unknown }[] = [];
afterAll(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

/** Sends about `perSecond` requests a second to Envoy's listener until stopped; counts the answers by status. */
function load(port: number, perSecond: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const counts = { ok: 0, limited: 0, other: 0 };
  let running = true;
  const one = () =>
    new Promise<void>((resolve) => {
      const req = http.request({ host: "127.0.0.1", port, path: "/", headers: { "x-bucket": "api" }, agent, timeout: 5000 }, (res) => {
        res.resume();
        res.on("end", () => {
          if (res.statusCode === 200) counts.ok++;
          else if (res.statusCode === 429) counts.limited++;
          else counts.other++;
          resolve();
        });
      });
      req.on("error", () => {
        counts.other++;
        resolve();
      });
      req.end();
    });
  const tickMs = 50;
  const loop = (async () => {
    let owed = 0;
    while (running) {
      owed += (perSecond * tickMs) / 1000;
      const n = Math.floor(owed);
      owed -= n;
      for (let i = 0; i < n; i++) void one();
      await sleep(tickMs);
    }
  })();
  return {
    counts,
    stop: async () => {
      running = false;
      await loop;
      agent.destroy();
    },
  };
}

describe.runIf(envoyAvailable(import.meta.filename))("RLQS through Envoy 1.40's rate_limit_quota filter", () => {
  it("three Envoys, two sluice instances, one Redis: at most 600 a minute, at least 540 under load, shares follow demand", async () => {
    const redis = await startRedis();
    open.push({ close: () => redis.stop() });
    const dir = ruleDir({ "r.yaml": RULES });
    const sluices: SluiceProcess[] = [];
    for (let i = 0; i < 2; i++) {
      const s = await startSluice(["--config", dir, "--redis", `redis://127.0.0.1:${redis.port}`]);
      sluices.push(s);
      open.push({ close: () => s.stop() });
    }
    // Admitted requests reach the upstream: counted there by the second they arrived in.
    const app = await startEchoUpstream();
    open.push(app);
    const envoys: EnvoyProcess[] = [];
    const ports: number[] = [];
    for (let i = 0; i < 3; i++) {
      const { config, listenerPort } = await rlqsEnvoyConfig({ sluicePorts: [sluices[i === 2 ? 1 : 0].port], appPort: app.port, bucket: { name: "api" } });
      const e = await startEnvoy(config, { concurrency: 1 });
      envoys.push(e);
      ports.push(listenerPort);
      open.push({ close: () => e.stop() });
    }
    envoyLogOnFailure(...envoys);
    const minuteOf = () => Math.floor(Date.now() / 60_000);
    const byMinute = new Map<number, number>();
    // Stamp each arrival as it comes (the echo server records in order).
    let stamped = app.received.length;
    const stamper = setInterval(() => {
      const m = minuteOf();
      for (; stamped < app.received.length; stamped++) byMinute.set(m, (byMinute.get(m) ?? 0) + 1);
    }, 20);
    const loads = [load(ports[0], 100), load(ports[1], 30), load(ports[2], 10)];
    const first = minuteOf() + 1;
    // The whole of the next minute's first 30 s under load.
    await until(
      async () => Date.now() >= first * 60_000 + 30_000,
      100_000,
      () => "the next minute did not come",
    );
    const before = loads.map((l) => l.counts.ok);
    await Promise.all(loads.map((l) => l.stop()));
    await sleep(200);
    clearInterval(stamper);
    const m = minuteOf();
    for (; stamped < app.received.length; stamped++) byMinute.set(m, (byMinute.get(m) ?? 0) + 1);
    for (const [minute, n] of byMinute) expect(n, `minute ${minute}`).toBeLessThanOrEqual(600);
    expect(byMinute.get(first) ?? 0).toBeGreaterThanOrEqual(540);
    // Shares follow demand: 10x admits more than 3x, which admits more than 1x.
    expect(before[0]).toBeGreaterThan(before[1]);
    expect(before[1]).toBeGreaterThan(before[2]);
    console.log(
      "admitted per minute",
      Object.fromEntries(byMinute),
      "per Envoy",
      before,
      loads.map((l) => l.counts),
    );
  }, 150_000);

  it("a bucket whose rule is removed gets abandon_action", async () => {
    const dir = ruleDir({ "r.yaml": RULES });
    const s = await startSluice(["--config", dir]);
    open.push({ close: () => s.stop() });
    const app = await startEchoUpstream();
    open.push(app);
    const { config, listenerPort } = await rlqsEnvoyConfig({ sluicePorts: [s.port], appPort: app.port, bucket: { name: "api" } });
    const e = await startEnvoy(config, { concurrency: 1, logLevel: "debug" });
    open.push({ close: () => e.stop() });
    envoyLogOnFailure(e);
    const l = load(listenerPort, 20);
    await until(
      async () => l.counts.ok > 0,
      20_000,
      () => "no request admitted",
    );
    fs.writeFileSync(
      path.join(dir, "r.yaml"),
      "domain: edge\ndescriptors:\n  - key: name\n    value: other\n    rate_limit: {unit: minute, requests_per_unit: 600}\n",
    );
    await until(
      async () => /wiped by abandon action/.test(e.log()),
      20_000,
      () => "Envoy never logged an abandon action",
    );
    await l.stop();
  }, 60_000);
});
