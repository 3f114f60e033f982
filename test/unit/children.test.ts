// The registry of processes tests start (test/helpers/children.ts): a failed test's own processes are
// killed without touching those its file started in beforeAll; the end of the file kills the rest.
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { killTracked, setCurrentTest, track, trackedCount } from "../helpers/children.js";

const SLEEPER = "setInterval(() => {}, 1000); console.log('up');";

async function sleeper(): Promise<ChildProcess> {
  const p = spawn(process.execPath, ["-e", SLEEPER], { stdio: ["ignore", "pipe", "ignore"] });
  await new Promise((r) => p.stdout!.once("data", r));
  return p;
}

const gone = (p: ChildProcess) => p.exitCode !== null || p.signalCode !== null;
const started: ChildProcess[] = [];

afterAll(() => {
  for (const p of started) if (!gone(p)) p.kill("SIGKILL");
});

describe("children", () => {
  it("kills the processes one test started, then the rest, each by SIGKILL, and forgets them", async () => {
    const before = trackedCount();
    setCurrentTest("test-a");
    const mine = track(await sleeper());
    setCurrentTest(undefined);
    const shared = track(await sleeper());
    started.push(mine, shared);
    expect(trackedCount()).toBe(before + 2);

    expect(await killTracked((id) => id === "test-a")).toBe(1);
    expect([mine.signalCode, gone(shared)]).toEqual(["SIGKILL", false]);
    expect(trackedCount()).toBe(before + 1);

    expect(await killTracked()).toBe(before + 1);
    expect(shared.signalCode).toBe("SIGKILL");
    expect(trackedCount()).toBe(0);
  });

  it("a process that exits by itself leaves the registry", async () => {
    const p = track(spawn(process.execPath, ["-e", "0"], { stdio: "ignore" }));
    await new Promise((r) => p.once("exit", r));
    expect([p.exitCode, trackedCount()]).toEqual([0, 0]);
  });
});
