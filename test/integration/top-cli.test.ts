// `sluice top` against a running sluice: --once, --json, the live view's first screen, and clear errors.
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { freePort } from "../helpers/ports.js";
import { binNodeFlags, MAIN, ROOT, ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";

const RULES = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: api_key
    rate_limit: { unit: hour, requests_per_unit: 1 }
`;

describe("sluice top", () => {
  let sluice: SluiceProcess;
  let client: RlsClient;
  let admin: string;

  beforeAll(async () => {
    sluice = await startSluice(["--config", ruleDir({ "edge.yaml": RULES })]);
    client = rlsClient(sluice.port);
    admin = `127.0.0.1:${sluice.adminPort}`;
    const call = (key: string, value: string) => client.shouldRateLimit({ domain: "edge", descriptors: [{ entries: [{ key, value }] }] });
    let refused = 0;
    for (let i = 0; i < 7; i++) if ((await call("remote_address", "192.0.2.1")).overall_code === OVER_LIMIT) refused++;
    for (let i = 0; i < 2; i++) if ((await call("api_key", "k-123")).overall_code === OVER_LIMIT) refused++;
    expect(refused).toBe(6);
    // Flushed within a second: wait for it on /top.
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(50)) {
      const body = (await (await fetch(`http://${admin}/top`)).json()) as { rules: unknown[] };
      if (body.rules.length === 2) break;
    }
  }, 30_000);

  afterAll(async () => {
    client?.close();
    await sluice?.stop();
  });

  it("--json prints /top's answer", async () => {
    const r = runCli(["top", "--admin", admin, "--json", "--clients", "3"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(await (await fetch(`http://${admin}/top?window=1m&n=3`)).json());
  });

  it("--once prints rules by refusals and the most refused clients of the first", () => {
    const r = runCli(["top", "--admin", admin, "--once"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines[0]).toMatch(new RegExp(`^sluice top - ${admin} - window 1m - \\d\\d:\\d\\d:\\d\\d UTC$`));
    expect(lines.slice(1)).toEqual([
      "",
      "  REFUSED    CLIENTS  LIMIT           RULE",
      "        5          1  2/HOUR          edge.remote_address",
      "        1          1  1/HOUR          edge.api_key",
      "",
      "most refused clients of edge.remote_address:",
      "          5  remote_address=192.0.2.1",
      "",
    ]);
    const chosen = runCli(["top", "--admin", admin, "--once", "--rule", "edge.api_key", "--window", "1h"]);
    expect(chosen.stdout).toContain("most refused clients of edge.api_key:\n          1  api_key=#");
    expect(chosen.stdout).not.toContain("k-123");
  });

  it("redraws every second until stopped", async () => {
    const proc = spawn(process.execPath, [...binNodeFlags(), MAIN, "top", "--admin", admin], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    await new Promise<void>((resolve) =>
      proc.stdout.on("data", (c: Buffer) => {
        out += c.toString();
        if (out.split("sluice top - ").length > 2) resolve();
      }),
    );
    proc.kill("SIGTERM");
    expect(out).toContain("edge.remote_address");
  });

  it("says what is wrong", async () => {
    const closed = await freePort();
    const down = runCli(["top", "--admin", `127.0.0.1:${closed}`, "--once"]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(new RegExp(`^sluice top: cannot reach http://127\\.0\\.0\\.1:${closed}/top\\?window=1m&n=5: .+\\n$`));
    const window = runCli(["top", "--window", "5m"]);
    expect(window.code).toBe(2);
    expect(window.stderr).toContain("sluice: --window takes 1m or 1h, got '5m'");
    const admin = runCli(["top", "--admin", "http://x:1"]);
    expect(admin.code).toBe(2);
    expect(admin.stderr).toContain("sluice: --admin takes HOST:PORT, got 'http://x:1'");
  });
});
