// A stop at any moment of sluice's start (issue 42): SIGTERM while its modules load, while the rules compile,
// while the ports open, once it serves. Each time sluice closes what it opened and exits 0, never by the signal.
// "From the first moment" is from when the process can first catch it: sluice catches SIGTERM in bin.ts before the
// rest of it loads; a fixture preloaded with --import (test/fixtures/stop-handler-marker.mjs) says when that is.
// Before it only Node's own start runs (tens of ms), where no program can catch a signal.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { track } from "../helpers/children.js";
import { binNodeFlags, MAIN, ROOT, ruleDir } from "../helpers/sluice.js";
import { sleep, until } from "../helpers/wait.js";

const MARKER = path.join(ROOT, "test/fixtures/stop-handler-marker.mjs");
/** What the marker's line starts with (the fixture's MARK). */
const MARK = "stop-handler-marker: ";
/** Rules whose compile takes a moment (a few hundred ms on a quiet host), so that stops land inside it too. */
const DESCRIPTORS = 5000;
/** After the handler is on: while main.js loads (a few hundred ms), while the rules compile, the ports open; then once serving. */
const STOPS: (number | "listening")[] = [0, 10, 50, 150, 300, 600, 1000, 1500, "listening"];

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function rules(): string {
  const lines = ["domain: big", "descriptors:"];
  for (let i = 0; i < DESCRIPTORS; i++) lines.push(`  - key: api_key\n    value: cust-${i}\n    rate_limit: {unit: minute, requests_per_unit: ${1000 + i}}`);
  return `${lines.join("\n")}\n`;
}

interface Run {
  /** From spawn to the handler being on. */
  handlerAfterMs: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  messages: string[];
  stderr: string;
}

/** Starts `sluice serve`, sends SIGTERM `delayMs` after its handler is on (or once it listens), and waits for it to end. */
async function stopAfter(dir: string, when: number | "listening", extra: string[] = []): Promise<Run> {
  const started = Date.now();
  const proc = track(
    spawn(
      process.execPath,
      [...binNodeFlags(), "--import", MARKER, MAIN, "serve", "--config", dir, "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", ...extra],
      { cwd: ROOT, env: { ...process.env, SLUICE_LOG_LEVEL: "info", SLUICE_LOG_FORMAT: "json" }, stdio: ["ignore", "pipe", "pipe"] },
    ),
  );
  let stdout = "";
  let stderr = "";
  let handlerAt: number | undefined;
  proc.stdout!.on("data", (c: Buffer) => (stdout += c));
  proc.stderr!.on("data", (c: Buffer) => {
    stderr += c;
    const m = new RegExp(`^${MARK}(\\d+)\n`, "m").exec(stderr);
    if (m && handlerAt === undefined) handlerAt = Number(m[1]);
  });
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => proc.once("exit", (code, signal) => resolve([code, signal])));
  await until(
    () => handlerAt !== undefined || proc.exitCode !== null || proc.signalCode !== null,
    15_000,
    () => `no handler:\n${stdout}${stderr}`,
    1,
  );
  if (handlerAt === undefined) throw new Error(`sluice exited before it caught SIGTERM:\n${stdout}${stderr}`);
  if (when === "listening")
    await until(
      () => stdout.includes('"msg":"listening"'),
      60_000,
      () => `not listening:\n${stdout}${stderr}`,
    );
  else await sleep(when);
  proc.kill("SIGTERM");
  const [code, signal] = await exited;
  const messages = stdout
    .split("\n")
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { msg: string }).msg);
  return { handlerAfterMs: handlerAt - started, code, signal, messages, stderr: stderr.replace(new RegExp(`^${MARK}\\d+\n`, "gm"), "") };
}

describe("SIGTERM at any moment after start", () => {
  it("exits 0 after `shutting down` and `stopped`, whether sluice was loading, compiling its rules, opening ports or serving", {
    timeout: 120_000,
  }, async () => {
    const dir = ruleDir({ "big.yaml": rules() });
    dirs.push(dir);
    const runs: (Run & { when: number | "listening" })[] = [];
    for (const when of STOPS) runs.push({ when, ...(await stopAfter(dir, when)) });
    console.log(
      `handler on after ${runs.map((r) => r.handlerAfterMs).join(", ")} ms from spawn; stopped at ${STOPS.join(", ")}: ${runs
        .map((r) => (r.messages.includes("listening") ? "serving" : r.messages.includes("rules loaded") ? "starting" : "loading"))
        .join(", ")}`,
    );
    for (const r of runs) {
      expect({ when: r.when, code: r.code, signal: r.signal, stderr: r.stderr, last: r.messages.slice(-2) }).toEqual({
        when: r.when,
        code: 0,
        signal: null,
        stderr: "",
        last: ["shutting down", "stopped"],
      });
      // A stop during the start is no failed load.
      expect(r.messages.filter((m) => m === "invalid rule" || m === "rules failed to load")).toEqual([]);
    }
    // The stops covered the start before the rules were loaded, and serving.
    expect(runs.some((r) => !r.messages.includes("rules loaded"))).toBe(true);
    expect(runs.at(-1)!.messages).toContain("listening");
  });

  it("with --workers 2: the primary and every worker stop cleanly, exit 0, whether they were starting or serving", { timeout: 120_000 }, async () => {
    const dir = ruleDir({ "big.yaml": rules() });
    dirs.push(dir);
    for (const when of [0, 300, "listening"] as const) {
      const r = await stopAfter(dir, when, ["--workers", "2"]);
      expect({ when, code: r.code, signal: r.signal, stderr: r.stderr, last: r.messages.at(-1) }).toEqual({
        when,
        code: 0,
        signal: null,
        stderr: "",
        last: "stopped",
      });
    }
  });
});
