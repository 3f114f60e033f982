// The rule compile process runs at the lowest CPU priority, every thread of it: Linux gives each thread its
// own nice value, and V8's GC and compiler threads exist before the process lowers its own. At normal
// priority those threads took CPU from the event loop that answers calls while a reload compiled.
import { fork } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { track } from "../helpers/children.js";
import { ROOT, ruleDir } from "../helpers/sluice.js";

/** The nice value of each thread of a process (field 19 of /proc/PID/task/TID/stat). */
function threadNice(pid: number): number[] {
  return fs.readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
  });
}

describe.runIf(process.platform === "linux")("the rule compile process", () => {
  it("runs every one of its threads at nice 19 once it has compiled", async () => {
    const dir = ruleDir({ "a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n" });
    const child = track(fork(path.join(ROOT, "dist/rules/compile-main.js"), [], { serialization: "advanced", stdio: ["ignore", "ignore", "inherit", "ipc"] }));
    try {
      const answer = await new Promise<{ id: number; out?: { errors: unknown[] } }>((resolve, reject) => {
        child.once("message", resolve);
        child.once("exit", (code) => reject(new Error(`compile process exited (${code})`)));
        child.send({ id: 1, input: { load: { mergeDomains: false }, prev: [], lastDigest: "" }, source: dir });
      });
      expect(answer.id).toBe(1);
      expect(answer.out?.errors).toEqual([]);
      const nice = threadNice(child.pid!);
      // The main thread, V8's platform workers and node's own: several threads, all lowered.
      expect(nice.length).toBeGreaterThan(3);
      expect(nice).toEqual(nice.map(() => 19));
    } finally {
      child.kill();
    }
  });
});
