// `sluice serve` runs with glibc's malloc limited to 2 arenas (src/bin.ts): it starts itself again, as the same
// process, with MALLOC_ARENA_MAX=2 and its node flags, unless the operator set MALLOC_ARENA_MAX.
import fs from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { binNodeFlags, MAIN, startSluice, type SluiceProcess } from "../helpers/sluice.js";

/** A process's environment and command line as the kernel holds them (what the last exec set). */
function procOf(pid: number) {
  const split = (f: string) => fs.readFileSync(`/proc/${pid}/${f}`, "utf8").split("\0").filter(Boolean);
  const env = Object.fromEntries(split("environ").map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
  return { env, cmdline: split("cmdline") };
}

let running: SluiceProcess | undefined;
afterEach(async () => {
  if (running) expect(await running.stop()).toBe(0);
  running = undefined;
});

describe.runIf(process.platform === "linux")("malloc arenas", () => {
  it("serve runs as the process it was started as, with MALLOC_ARENA_MAX=2 and its node flags", async () => {
    running = await startSluice(["--port", "0", "--admin-port", "0", "--host", "127.0.0.1"], { SLUICE_LOG_LEVEL: "info" }, { bare: true });
    const p = procOf(running.proc.pid!);
    expect(p.env.MALLOC_ARENA_MAX).toBe("2");
    expect(p.cmdline.slice(1)).toEqual([...binNodeFlags(), MAIN, "serve", "--port", "0", "--admin-port", "0", "--host", "127.0.0.1"]);
    expect((await fetch(`http://127.0.0.1:${running.adminPort}/healthz`)).status).toBe(200);
  });

  it("keeps the operator's MALLOC_ARENA_MAX", async () => {
    running = await startSluice([], { MALLOC_ARENA_MAX: "4" });
    expect(procOf(running.proc.pid!).env.MALLOC_ARENA_MAX).toBe("4");
  });
});
