// A SLUICE_* name is written once in src/, in the settings table (core/settings-table.ts): a string literal
// ("SLUICE_X") or a property read (env.SLUICE_X) anywhere else fails. So is a default: a DEFAULT_* constant
// elsewhere that spells out a value of the table's defaults instead of reading it fails.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { SETTINGS, type Setting } from "../../src/core/settings-table.js";

const SRC = path.resolve(import.meta.dirname, "../../src");

/** The one file that writes the names (each once); everything else reads them from it as ENV.X. */
const TABLE = "core/settings-table.ts";

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

describe("SLUICE_* names and defaults in src/", () => {
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

  it("writes every default once, in the table: other DEFAULT_* constants read it", () => {
    expect(spelledDefaults()).toEqual([]);
  });
});

const GENERIC_WORDS = new Set(["DEFAULT", "MS", "S", "MAX", "MIN"]);
const words = (name: string) => name.split("_").filter((w) => !GENERIC_WORDS.has(w));

/**
 * `DEFAULT_X = <number or string literal>` outside the table that spells out a setting's default: the same
 * value, and a name sharing a word with the setting's entry or a comment above it naming its variable.
 */
function spelledDefaults(): string[] {
  const settings = Object.entries(SETTINGS as Record<string, Setting>).flatMap(([key, s]) => {
    const d = "default" in s ? s.default : undefined;
    return typeof d === "number" || typeof d === "string" ? [{ key, env: s.env, value: String(d) }] : [];
  });
  const out: string[] = [];
  for (const file of sourceFiles(SRC)) {
    if (path.relative(SRC, file) === TABLE) continue;
    const lines = fs.readFileSync(file, "utf8").split("\n");
    lines.forEach((line, i) => {
      const m = /\b(DEFAULT_[A-Z0-9_]+)\s*(?::[^=]+)?=\s*(?:"([^"]*)"|'([^']*)'|([0-9][0-9_]*))\s*[;,]/.exec(line);
      if (!m) return;
      const value = m[2] ?? m[3] ?? m[4].replace(/_/g, "");
      const near = `${lines[i - 1] ?? ""} ${line}`;
      const own = words(m[1]);
      const setting = settings.find((s) => s.value === value && (near.includes(s.env) || words(s.key).some((w) => own.includes(w))));
      if (setting) out.push(`${path.relative(SRC, file)}:${i + 1}: ${line.trim()} (${setting.env}'s default)`);
    });
  }
  return out;
}

function lineOf(rel: string, text: string): number {
  return (
    fs
      .readFileSync(path.join(SRC, rel), "utf8")
      .split("\n")
      .findIndex((l) => l.includes(text)) + 1
  );
}
