// The test tree keeps one way to wait: test/helpers/wait.ts (sleep, until). A file that writes its own
// sleep, until, waitFor or eventually, or builds a sleep from setTimeout, fails here with its line.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const TEST_DIR = path.join(ROOT, "test");
/** The shared helper, and this file (its examples are own waits on purpose). */
const EXEMPT = [path.join(TEST_DIR, "helpers/wait.ts"), import.meta.filename];

/** What counts as a wait of a file's own: each pattern is checked on every line. */
const OWN_WAITS: [string, RegExp][] = [
  ["defines sleep/until/waitFor/eventually", /(?:\bfunction\s*\*?\s*|\b(?:const|let|var)\s+)(?:sleep|until|waitFor|eventually)\b/],
  ["builds a sleep from setTimeout", /new Promise\s*(?:<[^>]*>)?\(\s*\(?\s*\w*\s*\)?\s*=>\s*setTimeout\(/],
  ["imports node:timers/promises", /["']node:timers\/promises["']|["']timers\/promises["']/],
];

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return /\.(?:[cm]?[jt]s)$/.test(e.name) ? [p] : [];
  });
}

/** "file:line: what it does" for each line that waits its own way. */
function ownWaits(file: string, text: string): string[] {
  const found: string[] = [];
  text.split("\n").forEach((line, i) => {
    for (const [what, re] of OWN_WAITS) if (re.test(line)) found.push(`${path.relative(ROOT, file)}:${i + 1}: ${what}`);
  });
  return found;
}

describe("one way to wait", () => {
  it("the patterns find each kind of own wait, and not the shared helper's use", () => {
    const own = [
      "const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));",
      "async function until(cond: () => boolean) {",
      "export async function waitFor(what: string) {",
      "async function eventually(check: () => Promise<boolean>) {",
      "await new Promise<void>((resolve) => setTimeout(resolve, 10));",
      'import { setTimeout as delay } from "node:timers/promises";',
    ];
    for (const line of own) expect(ownWaits("x.ts", line), line).not.toEqual([]);
    const fine = [
      'import { sleep, until } from "../helpers/wait.js";',
      'await until(() => seen.length === 2, 5000, "both lines");',
      'await peer.waitFor("GOAWAY", (f) => f.type === FRAME.GOAWAY);',
      "async function untilCounted(user: string) {",
      "const timer = setTimeout(resolve, 5000);",
    ];
    for (const line of fine) expect(ownWaits("x.ts", line), line).toEqual([]);
  });

  it("no file under test/ but wait.ts defines a sleep or an until of its own", () => {
    const files = sources(TEST_DIR).filter((f) => !EXEMPT.includes(f));
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap((f) => ownWaits(f, fs.readFileSync(f, "utf8")))).toEqual([]);
  });
});
