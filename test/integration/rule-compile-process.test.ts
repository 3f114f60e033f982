// The rule compile's child process (issue 42): a compile whose process is killed mid-reload is tried again with
// backoff, the files unchanged, until it succeeds (the new rules in force within 10 s, nobody touching the file);
// and the compile process of a sluice that is SIGKILLed ends at once instead of running its job to the end.
import fs from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

const OK_RULES = "domain: ok\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: minute, requests_per_unit: 1000}\n";

/** A valid rule file of about `bytes` bytes (per-customer descriptors). */
function bigRules(bytes: number): string {
  const lines = ["domain: big", "descriptors:"];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const d = `  - key: api_key\n    value: cust-${i}\n    rate_limit: {unit: minute, requests_per_unit: ${1000 + i}}`;
    lines.push(d);
    size += d.length + 1;
  }
  return `${lines.join("\n")}\n`;
}

const sluices: SluiceProcess[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const s of sluices) await s.stop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/** The child processes of pid (Linux). */
function childrenOf(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Ended: gone, or a zombie nobody reaped yet (it runs no more). */
function ended(pid: number): boolean {
  try {
    return /^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return true;
  }
}

/** Writes the file as a ConfigMap or an editor does (a rename): one change, seen whole. */
function replace(dir: string, name: string, text: string): void {
  const tmp = path.join(dir, `.${name}.tmp`);
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, path.join(dir, name));
}

async function readyz(s: SluiceProcess): Promise<{ rules: { domains: Record<string, number>; errors: number; retryAt?: string } }> {
  return (await fetch(`http://127.0.0.1:${s.adminPort}/readyz`)).json() as never;
}

/** Starts sluice on an ok rule, writes a rule file of `mb` MB and returns the compile process of that reload. */
async function reloadingBigFile(mb: number): Promise<{ s: SluiceProcess; dir: string; compile: number }> {
  const dir = ruleDir({ "ok.yaml": OK_RULES });
  dirs.push(dir);
  // No periodic re-read: only the retry can load the file again.
  const s = await startSluice(["--config", dir], { SLUICE_RELOAD_INTERVAL_S: "0" });
  sluices.push(s);
  // The first load's compile processes are gone: the next child is this reload's.
  await until(
    () => childrenOf(s.proc.pid!).length === 0,
    15_000,
    () => "the first load's compile process runs on",
  );
  replace(dir, "big.yaml", bigRules(mb << 20));
  let compile: number | undefined;
  await until(
    () => (compile = childrenOf(s.proc.pid!)[0]) !== undefined,
    15_000,
    () => "no compile process",
    2,
  );
  // Mid-compile, not at its spawn (a process killed before it runs a job is another path): it has run its
  // own code for a while.
  await until(
    () => ended(compile!) || cpuSeconds(compile!) >= 0.3,
    15_000,
    () => "the compile process to start compiling",
    5,
  );
  return { s, dir, compile: compile! };
}

/** CPU seconds a process has used (utime + stime of /proc/PID/stat, at 100 ticks a second). */
function cpuSeconds(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

describe("the rule compile process", () => {
  it("killed mid-reload of a valid 4 MB file: tried again, the file in force within 10 s with no touch", { timeout: 60_000 }, async () => {
    const { s, compile } = await reloadingBigFile(4);
    process.kill(compile, "SIGKILL");
    const killedAt = Date.now();
    await until(
      async () => (await readyz(s)).rules.domains.big !== undefined,
      50_000,
      () => `not in force:\n${s.logs.slice(-10).join("\n")}`,
      100,
    );
    const inForceMs = Date.now() - killedAt;
    const failed = await s.waitForLog((l) => l.msg === "rule compile failed; trying again");
    expect(failed).toMatchObject({ retryInMs: 250, failures: 1 });
    const reloaded = await s.waitForLog((l) => l.msg === "rules reloaded" && l.domains?.big > 0);
    console.log(`in force ${inForceMs} ms after the compile process was killed; the retry's compile took ${reloaded.loadMs} ms`);
    // Within 10 s; on a host so busy that the compile itself (at the lowest CPU priority) took longer, the retry
    // still started at once: the rest is the compile's own time.
    expect(inForceMs <= 10_000 || inForceMs - reloaded.loadMs <= 2000, `${inForceMs} ms, compile ${reloaded.loadMs} ms`).toBe(true);
    const ready = await readyz(s);
    expect([ready.rules.errors, ready.rules.retryAt]).toEqual([0, undefined]);
  });

  it("ends at once when sluice is SIGKILLed mid-compile", { timeout: 60_000 }, async () => {
    // A job of seconds (8 MB): ending within the bound is not the job's own end.
    const { s, compile } = await reloadingBigFile(8);
    s.proc.kill("SIGKILL");
    const killedAt = Date.now();
    await until(
      () => ended(compile),
      5000,
      () => `the compile process runs on: ${fs.readFileSync(`/proc/${compile}/status`, "utf8").split("\n").slice(0, 8).join("; ")}`,
      5,
    );
    const afterMs = Date.now() - killedAt;
    console.log(`compile process ended ${afterMs} ms after sluice was killed`);
    // It looks every 100 ms; a busy host delays that.
    expect(afterMs).toBeLessThan(2000);
  });
});
