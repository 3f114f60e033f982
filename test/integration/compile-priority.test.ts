// A reload's compile process runs at the lowest CPU priority, every thread of it but the watchdog: Linux gives each thread its
// own nice value, and V8's GC and compiler threads exist before the process lowers its own. At normal
// priority those threads took CPU from the event loop that answers calls while a reload compiled. The first
// load, before anything is served, keeps sluice's priority (on a busy host a lowered one only delays the start).
import { fork } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { LOWEST_PRIORITY_ARG } from "../../src/rules/compile-process.js";
import { track } from "../helpers/children.js";
import { ROOT, ruleDir } from "../helpers/sluice.js";

/** The name and nice value of each thread of a process (fields 2 and 19 of /proc/PID/task/TID/stat). */
function threadNice(pid: number): { name: string; nice: number }[] {
  return fs.readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    return { name: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")), nice: Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]) };
  });
}

/** A compile process started with `args`, after its answer to one job: the nice value of each of its threads. */
async function compiledThreadNice(args: string[]): Promise<{ name: string; nice: number }[]> {
  const dir = ruleDir({ "a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n" });
  const child = track(fork(path.join(ROOT, "dist/rules/compile-main.js"), args, { serialization: "advanced", stdio: ["ignore", "ignore", "inherit", "ipc"] }));
  try {
    const answer = await new Promise<{ id: number; out?: { errors: unknown[] } }>((resolve, reject) => {
      child.once("message", resolve);
      child.once("exit", (code) => reject(new Error(`compile process exited (${code})`)));
      child.send({ id: 1, input: { load: { mergeDomains: false }, prev: [], lastDigest: "" }, source: dir });
    });
    expect(answer.id).toBe(1);
    expect(answer.out?.errors).toEqual([]);
    return threadNice(child.pid!);
  } finally {
    child.kill();
  }
}

describe.runIf(process.platform === "linux")("the rule compile process", () => {
  it(`with ${LOWEST_PRIORITY_ARG} (a reload) runs every one of its threads at nice 19 but its watchdog; without (the first load) at sluice's own`, async () => {
    const threads = await compiledThreadNice([LOWEST_PRIORITY_ARG]);
    // One worker thread is the watchdog that ends the process with sluice: it keeps sluice's priority, so that
    // a busy host cannot starve it. The main thread, V8's platform workers and node's own: all lowered.
    const watchdog = threads.filter((t) => t.name === "WorkerThread");
    expect(watchdog.map((t) => t.nice)).toEqual([os.getPriority()]);
    const low = threads.filter((t) => t.name !== "WorkerThread").map((t) => t.nice);
    expect(low.length).toBeGreaterThan(3);
    expect(low).toEqual(low.map(() => 19));
    const first = (await compiledThreadNice([])).map((t) => t.nice);
    expect(first).toEqual(first.map(() => os.getPriority()));
  });
});
