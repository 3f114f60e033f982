// `npm run bench` must keep running on a fresh build: a one-second run of one gRPC scenario (sluice against
// the no-op baseline) and of the envoy scenario, checked for figures, not for their size.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ENVOY, envoyAvailable } from "../helpers/envoy.js";
import { ROOT } from "../helpers/sluice.js";

function bench(args: string[]): { code: number | null; output: string; result: Record<string, any> } {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-smoke-")), "result.json");
  const r = spawnSync(process.execPath, [path.join(ROOT, "bench/run.mjs"), ...args, "--duration", "1", "--warmup", "0", "--rounds", "1", "--out", out], {
    cwd: ROOT,
    env: { ...process.env, ...(ENVOY ? { SLUICE_ENVOY: ENVOY } : {}) },
    encoding: "utf8",
    timeout: 120_000,
    killSignal: "SIGKILL",
  });
  const output = `${r.stdout}\n${r.stderr}`;
  return { code: r.status, output, result: fs.existsSync(out) ? JSON.parse(fs.readFileSync(out, "utf8")) : {} };
}

describe("npm run bench", () => {
  it("a one-second run of memory-2tb measures sluice and the baseline", () => {
    const { code, output, result } = bench(["--scenario", "memory-2tb"]);
    expect(code, output).toBe(0);
    expect(result.scenarios.map((s: any) => s.id)).toEqual(["memory-2tb"]);
    const [sc] = result.scenarios;
    expect(sc.failed, output).toBeUndefined();
    expect(sc.sluice.full.rps).toBeGreaterThan(0);
    expect(sc.baseline.full.rps).toBeGreaterThan(0);
  }, 150_000);

  it.runIf(envoyAvailable(import.meta.filename))(
    "a one-second run of the envoy scenario measures its three configurations",
    () => {
      const { code, output, result } = bench(["--scenario", "envoy"]);
      expect(code, output).toBe(0);
      expect(result.envoy.failed, output).toBeUndefined();
      expect(result.envoy.configs.map((c: any) => c.id)).toEqual(["no-filter", "memory", "redis"]);
      for (const c of result.envoy.configs) expect(c.rps, c.id).toBeGreaterThan(0);
      expect(result.envoy.configs[0].ratio).toBe(1);
      // The filter asked sluice (its timeouts on a busy host are reported, not failed on).
      for (const c of result.envoy.configs.slice(1)) expect(c.filterChecks.ok, c.id).toBeGreaterThan(0);
      expect(output).toMatch(/vs none/);
    },
    150_000,
  );
});
