// Resident memory of a process, from /proc (Linux).
import fs from "node:fs";
import v8 from "node:v8";
import vm from "node:vm";

export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

export const MiB = 1024 * 1024;

/** A full garbage collection in this process (no --expose-gc needed). */
export function collectGarbage(): void {
  v8.setFlagsFromString("--expose-gc");
  (vm.runInNewContext("gc") as () => void)();
}
