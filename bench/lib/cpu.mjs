// CPU seconds used so far by a process and its direct children (sluice --workers forks its workers).
import fs from "node:fs";

function ownSeconds(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // f[0] is field 3 of proc(5): utime is field 14, stime field 15, in clock ticks (100 Hz on Linux).
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

function children(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

export function cpuSeconds(pid) {
  let total = ownSeconds(pid);
  for (const c of children(pid)) total += ownSeconds(c);
  return total;
}
