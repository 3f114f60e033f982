// RLQS with Envoy 1.40's own rate_limit_quota filter, in one run (minute windows are slow to come: Envoy reads
// an assignment's time to live in whole seconds, so a per-second window cannot hold a lease that ends before it
// does). Three Envoys, two sluice instances on one Redis, one bucket limited to 600 a minute, uneven load (about
// 100, 30 and 10 requests a second: 10x, 3x, 1x, far over the limit). Fixed windows by Redis's clock (the host's).
//   window 0 (the load's first ~22 s): the 10x Envoy is SIGKILLed holding a lease and started again; the sluice
//     the 1x Envoy talks to is stopped with SIGTERM and started again on its port. At most 600 admitted.
//   window 1 (its first ~20 s): the Envoys together admit at most 600 and at least 540 (the dead Envoy's units
//     came back at the window's end; the restarted sluice serves the 1x Envoy again), the more an Envoy is asked
//     the more it admits.
//   meanwhile: a second bucket whose rule is removed gets abandon_action (Envoy's debug log says so).
import fs from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { envoyAvailable, envoyLogOnFailure, startEnvoy, type EnvoyProcess } from "../helpers/envoy.js";
import { startRedis } from "../helpers/redis-server.js";
import { rlqsEnvoyConfig } from "../helpers/rlqs-envoy.js";
import { startCountingUpstream, startLoad } from "../helpers/rlqs-load.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep, until } from "../helpers/wait.js";

const API = "  - key: name\n    value: api\n    rate_limit: {unit: minute, requests_per_unit: 600}\n";
const GONE = "  - key: name\n    value: gone\n    rate_limit: {unit: minute, requests_per_unit: 600}\n";
// failure_mode deny and a store timeout a busy host never reaches: a timed-out lease call answers by the rule's
// failure mode (allow: ALLOW_ALL for one time to live), which is not what this test measures.
const RULES = (...d: string[]) => `domain: edge\nfailure_mode: deny\ndescriptors:\n${d.join("")}`;
const SLUICE_ENV = { SLUICE_STORE_TIMEOUT_MS: "2000" };
const MINUTE = 60_000;
/** Window 0 lasts at least this long under load: the kill and the restarts happen in it. */
const WINDOW0_MS = 22_000;

const open: { close(): Promise<unknown> | unknown }[] = [];
afterAll(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

describe.runIf(envoyAvailable(import.meta.filename))("RLQS through Envoy 1.40's rate_limit_quota filter", () => {
  it("three Envoys, two sluice: at most 600 a minute through an Envoy's SIGKILL and a sluice's SIGTERM, at least 540 under load, shares follow demand; a removed rule's bucket is abandoned", async () => {
    const redis = await startRedis();
    open.push({ close: () => redis.stop() });
    const dir = ruleDir({ "r.yaml": RULES(API, GONE) });
    const sluiceArgs = ["--config", dir, "--redis", `redis://127.0.0.1:${redis.port}`];
    const sluices: SluiceProcess[] = await Promise.all([startSluice(sluiceArgs, SLUICE_ENV), startSluice(sluiceArgs, SLUICE_ENV)]);
    for (const s of sluices) open.push({ close: () => s.stop() });
    const app = await startCountingUpstream();
    open.push(app);
    // Envoys 0 and 1 call sluice 0, Envoy 2 sluice 1. The bucket is {name: <x-bucket header>}.
    const configs = await Promise.all([0, 1, 2].map((i) => rlqsEnvoyConfig({ sluicePorts: [sluices[i === 2 ? 1 : 0].port], appPort: app.port })));
    const envoys: EnvoyProcess[] = await Promise.all(configs.map((c, i) => startEnvoy(c.config, { concurrency: 1, logLevel: i === 2 ? "debug" : "info" })));
    for (const e of envoys) open.push({ close: () => e.stop() });
    envoyLogOnFailure(...envoys);

    // The abandon, alongside: a few requests to bucket "gone" through Envoy 2, then its rule is removed.
    const abandon = (async () => {
      const l = startLoad(configs[2].listenerPort, 5, { "x-bucket": "gone", "x-from": "gone" });
      try {
        await until(
          () => l.counts.ok > 0,
          30_000,
          () => `no request to bucket "gone" admitted (${JSON.stringify(l.counts)})`,
        );
        fs.writeFileSync(path.join(dir, "r.yaml"), RULES(API));
        await until(
          () => /wiped by abandon action/.test(envoys[2].log()),
          30_000,
          () => "Envoy never logged an abandon action",
        );
      } finally {
        await l.stop();
      }
    })();

    // Window 1 starts at a minute boundary at least WINDOW0_MS away; the load starts WINDOW0_MS before it.
    const boundary = Math.ceil((Date.now() + WINDOW0_MS) / MINUTE) * MINUTE;
    await sleep(Math.max(0, boundary - WINDOW0_MS - Date.now()));
    const rates = [100, 30, 10];
    const loads = rates.map((r, i) => startLoad(configs[i].listenerPort, r, { "x-bucket": "api", "x-from": String(i) }));
    try {
      // Envoy 0 admits at its measured demand (its first leases are small): it now holds a lease sized for it.
      await until(
        () => loads[0].counts.ok >= 60,
        20_000,
        () => `Envoy 0 admitted ${loads[0].counts.ok}`,
      );
      envoys[0].proc.kill("SIGKILL");
      await new Promise((r) => envoys[0].proc.once("exit", r));
      const killedAt = Date.now();
      envoys[0] = await startEnvoy(configs[0].config, { concurrency: 1 });
      open.push({ close: () => envoys[0].stop() });
      // sluice 1 stopped under load (GOAWAY, streams end UNAVAILABLE) and started again on its port.
      const port1 = sluices[1].port;
      expect(await sluices[1].stop()).toBe(0);
      sluices[1] = await startSluice([...sluiceArgs, "--port", String(port1)], SLUICE_ENV);
      open.push({ close: () => sluices[1].stop() });
      const restartedAt = Date.now();
      expect(restartedAt, "window 0 ended before the kill and the restart were done").toBeLessThan(boundary);

      const inWindow = (w: number) => app.arrivals.filter((a) => a.bucket === "api" && Math.floor(a.atMs / MINUTE) === w);
      const w1 = boundary / MINUTE;
      await until(
        () => inWindow(w1).length >= 540,
        boundary + 40_000 - Date.now(),
        () => `window 1 admitted only ${inWindow(w1).length}: per second and Envoy ${perSecond(app.arrivals, boundary - WINDOW0_MS)}`,
      );
      await sleep(Math.max(3000, boundary + 20_000 - Date.now()));
      await Promise.all(loads.map((l) => l.stop()));
      await sleep(200);

      const perWindow = new Map<number, number>();
      for (const a of app.arrivals) if (a.bucket === "api") perWindow.set(Math.floor(a.atMs / MINUTE), (perWindow.get(Math.floor(a.atMs / MINUTE)) ?? 0) + 1);
      for (const [w, n] of perWindow)
        expect(n, `window ${w} (per second and Envoy ${perSecond(app.arrivals, boundary - WINDOW0_MS)})`).toBeLessThanOrEqual(600);
      const w1n = inWindow(w1).length;
      expect(w1n).toBeGreaterThanOrEqual(540);
      // Shares follow demand in window 1: the 1x Envoy gets the least. Between the two far over their share (10x, 3x)
      // what units come back goes to whichever asks first (docs/rlqs.md, Not done yet): on a busy host the 3x one
      // got 273 to the 10x one's 234. Envoy 2 admitting at all shows it reached the restarted sluice.
      const share = [0, 1, 2].map((i) => inWindow(w1).filter((a) => a.from === String(i)).length);
      expect(share[0], `shares ${share}`).toBeGreaterThan(share[2]);
      expect(share[1], `shares ${share}`).toBeGreaterThan(share[2]);
      expect(share[2]).toBeGreaterThan(0);
      // The restarted sluice's metrics: Envoy 2's new stream, its bucket, leases taken, DENY_ALL at the limit.
      const m = await metricsOf(sluices[1].adminPort);
      expect(m.sluice_rlqs_streams_open).toBe(1);
      expect(m.sluice_rlqs_buckets).toBeGreaterThanOrEqual(1); // "api", and "gone" where Envoy 2 made it again after the abandon
      expect(m.sluice_rlqs_units_leased_total).toBeGreaterThanOrEqual(share[2]);
      expect(m.sluice_rlqs_store_calls_total).toBeGreaterThan(0);
      expect(m.sluice_rlqs_assignments_total).toBeGreaterThan(0);
      expect(m.sluice_rlqs_denied_reported_total).toBeGreaterThan(0);
      const w0 = inWindow(w1 - 1);
      console.log("RLQS run", {
        perWindow: Object.fromEntries(perWindow),
        window1Shares: share,
        restartedSluiceMetrics: m,
        window0: { total: w0.length, envoy0BeforeKill: w0.filter((a) => a.from === "0" && a.atMs <= killedAt).length },
        answers: loads.map((l) => l.counts),
      });
    } finally {
      await Promise.all(loads.map((l) => l.stop()));
    }
    await abandon;
  }, 150_000);
});

/** Admitted per second (since startMs) and Envoy, as text: what a failure shows. */
function perSecond(arrivals: { atMs: number; from: string; bucket: string }[], startMs: number): string {
  const rows = new Map<number, number[]>();
  for (const a of arrivals) {
    if (a.bucket !== "api") continue;
    const sec = Math.floor((a.atMs - startMs) / 1000);
    const row = rows.get(sec) ?? [0, 0, 0];
    row[Number(a.from)]++;
    rows.set(sec, row);
  }
  return [...rows].map(([sec, r]) => `${sec}:${r.join("/")}`).join(" ");
}

/** sluice's RLQS metrics (sluice_rlqs_*) from its admin port's /metrics. */
async function metricsOf(adminPort: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const m = /^(sluice_rlqs_\w+) (\S+)$/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}
