// When a rule compile has taken too long. It runs at the lowest CPU priority, so on a busy host its wall time says
// nothing about its work: a 1 MB file's 1.2 s of CPU took 67 s of wall time beside two busy loops. So a compile
// is bounded by its own CPU (a parse that never ends burns it) and by a wall time without any CPU (a process
// stuck on a read), read from /proc where there is one; elsewhere by wall time alone.
import { readFileSync } from "node:fs";

/** CPU a compile may use (a parse that never ends must not hold reloads forever). */
export const COMPILE_CPU_BUDGET_MS = 120_000;
/** Wall time a compile may go without using any CPU, and the whole bound where the CPU cannot be read. */
export const COMPILE_STALL_MS = 120_000;

/** The process's CPU so far (user + system, all threads) in ms; undefined where /proc cannot tell. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    // Fields after the command name (which may hold spaces), from the state: utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** Linux's USER_HZ: 100 on every architecture it supports for /proc's times. */
const CLOCK_TICKS_PER_SECOND = 100;

/** Why a compile that started with `startCpuMs` is over its bound at `nowMs`, or undefined while it may go on. */
export class CompileDeadline {
  private lastCpuMs: number | undefined;
  private lastProgressMs: number;

  constructor(
    private readonly startCpuMs: number | undefined,
    startMs: number,
  ) {
    this.lastCpuMs = startCpuMs;
    this.lastProgressMs = startMs;
  }

  /** cpuMs: the process's CPU now (undefined: unknown). */
  over(cpuMs: number | undefined, nowMs: number): string | undefined {
    if (cpuMs === undefined || this.startCpuMs === undefined) {
      return nowMs - this.lastProgressMs >= COMPILE_STALL_MS ? `did not finish within ${COMPILE_STALL_MS / 1000} s` : undefined;
    }
    if (cpuMs - this.startCpuMs >= COMPILE_CPU_BUDGET_MS) return `used ${COMPILE_CPU_BUDGET_MS / 1000} s of CPU without finishing`;
    if (this.lastCpuMs === undefined || cpuMs > this.lastCpuMs) {
      this.lastCpuMs = cpuMs;
      this.lastProgressMs = nowMs;
      return undefined;
    }
    return nowMs - this.lastProgressMs >= COMPILE_STALL_MS ? `used no CPU for ${COMPILE_STALL_MS / 1000} s` : undefined;
  }
}
