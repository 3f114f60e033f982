// A SLUICE_* name is written once in src/, in its table (core/setting-names.ts): a string literal ("SLUICE_X")
// or a property read (env.SLUICE_X) anywhere else fails.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const SRC = path.resolve(import.meta.dirname, "../../src");

/** The one file that writes the names (each once); everything else reads them from it as ENV.X. */
const TABLE = "core/setting-names.ts";

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : p.endsWith(".ts") ? [p] : [];
  });
}

/** Each name's places: file:line of every literal or property read (comments and longer strings do not count). */
function places(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    fs.readFileSync(file, "utf8")
      .split("\n")
      .forEach((line, i) => {
        if (/^\s*(\/\/|\*|\/\*)/.test(line)) return;
        for (const m of line.matchAll(/["'`](SLUICE_[A-Z0-9_]+)["'`]|\.(SLUICE_[A-Z0-9_]+)\b/g)) {
          const name = m[1] ?? m[2];
          const list = out.get(name) ?? [];
          list.push(`${path.relative(SRC, file)}:${i + 1}`);
          out.set(name, list);
        }
      });
  }
  return out;
}

describe("SLUICE_* names in src/", () => {
  const found = places();

  it("writes every name once, in the table", () => {
    const elsewhere = [...found].filter(([, at]) => at.length !== 1 || !at[0].startsWith(`${TABLE}:`)).map(([name, at]) => `${name}: ${at.join(", ")}`);
    expect(elsewhere).toEqual([]);
  });

  it("finds the forms it counts", () => {
    expect(found.get("SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD_FILE")).toEqual([
      `${TABLE}:` + lineOf(TABLE, '"SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD_FILE"'),
    ]);
    expect(found.size).toBeGreaterThan(80);
  });
});

function lineOf(rel: string, text: string): number {
  return (
    fs
      .readFileSync(path.join(SRC, rel), "utf8")
      .split("\n")
      .findIndex((l) => l.includes(text)) + 1
  );
}
