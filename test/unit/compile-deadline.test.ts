import { describe, expect, it } from "vitest";
import { COMPILE_CPU_BUDGET_MS, COMPILE_STALL_MS, CompileDeadline, processCpuMs } from "../../src/rules/compile-deadline.js";

describe("a rule compile's deadline", () => {
  it("runs on while its process uses CPU, however slowly, up to its CPU budget", () => {
    const d = new CompileDeadline(1000, 0);
    // 1 % of a core for ten minutes: busy host, progress every check.
    for (let s = 1; s <= 600; s++) expect(d.over(1000 + s * 10, s * 1000)).toBeUndefined();
    expect(d.over(1000 + COMPILE_CPU_BUDGET_MS - 1, 601_000)).toBeUndefined();
    expect(d.over(1000 + COMPILE_CPU_BUDGET_MS, 602_000)).toBe("used 120 s of CPU without finishing");
  });

  it("fails after a wall time with no CPU at all (a process stuck on a read)", () => {
    const d = new CompileDeadline(500, 0);
    expect(d.over(700, 5_000)).toBeUndefined();
    expect(d.over(700, 5_000 + COMPILE_STALL_MS - 1)).toBeUndefined();
    expect(d.over(700, 5_000 + COMPILE_STALL_MS)).toBe("used no CPU for 120 s");
  });

  it("where the CPU cannot be read, is the wall time alone", () => {
    const d = new CompileDeadline(undefined, 10_000);
    expect(d.over(undefined, 10_000 + COMPILE_STALL_MS - 1)).toBeUndefined();
    expect(d.over(undefined, 10_000 + COMPILE_STALL_MS)).toBe("did not finish within 120 s");
  });

  it("reads a process's CPU from /proc, and nothing for a process that is not there", () => {
    const before = processCpuMs(process.pid);
    if (before === undefined) return; // no /proc: the wall bound applies (above)
    const cpuMs = () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1000;
    };
    // 60 ms of this process's own CPU, however long the host makes it take.
    for (const end = cpuMs() + 60; cpuMs() < end; );
    const after = processCpuMs(process.pid)!;
    expect(after - before).toBeGreaterThanOrEqual(40);
    expect(processCpuMs(2 ** 22 + 1)).toBeUndefined();
  });
});
