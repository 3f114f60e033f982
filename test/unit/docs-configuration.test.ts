// docs/configuration.md's tables against the settings table (src/core/settings-table.ts) and the code: every
// setting's row (flag, commands, variable, default), every flag each command accepts (as `--help` prints them),
// every SLUICE_* variable the code reads, nothing more, nothing less; each reference variable's row names the
// setting it maps onto; and the page's CLI block is the usage text.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { COMMAND_FLAGS } from "../../src/settings/settings.js";
import { commandsOf, defaultText, SETTINGS, type Setting } from "../../src/core/settings-table.js";
import { USAGE } from "../../src/settings/usage.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

interface Row {
  flag?: string;
  commands: string[];
  env?: string;
  defaultText: string;
  /** The default and meaning cells. */
  text: string;
}

/** The rows of the docs/configuration.md table whose header starts with `| flag | commands | environment |`. */
function flagTable(): Row[] {
  const lines = fs.readFileSync(path.join(ROOT, "docs/configuration.md"), "utf8").split("\n");
  const start = lines.findIndex((l) => /^\|\s*flag\s*\|\s*commands\s*\|\s*environment\s*\|/.test(l));
  expect(start).toBeGreaterThanOrEqual(0);
  const rows: Row[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    const cells = line
      .split("|")
      .slice(1, -1)
      .map((c) => c.trim());
    const flag = /^`--([a-z0-9-]+)/.exec(cells[0])?.[1];
    const env = /^`(SLUICE_[A-Z0-9_]+)`$/.exec(cells[2])?.[1];
    rows.push({ flag, commands: [...cells[1].matchAll(/`([a-z]+)`/g)].map((m) => m[1]).sort(), env, defaultText: cells[3], text: cells.slice(3).join(" | ") });
  }
  return rows;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : p.endsWith(".ts") ? [p] : [];
  });
}

describe("docs/configuration.md flag table", () => {
  it("lists exactly the flags each command accepts", () => {
    const fromCode: Record<string, string[]> = {};
    for (const [command, flags] of Object.entries(COMMAND_FLAGS)) {
      for (const flag of Object.keys(flags)) (fromCode[flag] ??= []).push(command);
    }
    for (const list of Object.values(fromCode)) list.sort();
    const fromDocs: Record<string, string[]> = {};
    for (const row of flagTable()) {
      if (!row.flag) continue;
      expect(fromDocs[row.flag], `--${row.flag} listed twice`).toBeUndefined();
      fromDocs[row.flag] = row.commands;
    }
    expect(fromDocs).toEqual(fromCode);
  });

  it("gives each flag the variable and default that --help shows", () => {
    const rows = new Map(flagTable().flatMap((r) => (r.flag ? [[r.flag, r]] : [])));
    for (const [command, flags] of Object.entries(COMMAND_FLAGS)) {
      for (const [flag, spec] of Object.entries(flags)) {
        const row = rows.get(flag)!;
        expect({ env: row.env, defaultText: row.defaultText }, `${command} --${flag}`).toEqual({ env: spec.env, defaultText: spec.defaultText });
      }
    }
  });

  it("lists exactly the SLUICE_* environment variables the code reads", () => {
    const fromCode = new Set<string>();
    for (const file of sourceFiles(path.join(ROOT, "src"))) {
      for (const m of fs.readFileSync(file, "utf8").matchAll(/\bSLUICE_[A-Z0-9_]+\b/g)) fromCode.add(m[0]);
    }
    const fromDocs = flagTable().flatMap((r) => (r.env ? [r.env] : []));
    expect(new Set(fromDocs).size).toBe(fromDocs.length);
    expect(fromDocs.sort()).toEqual([...fromCode].sort());
  });

  it("gives every setting of the table its row: flag, commands, variable and default", () => {
    const rows = new Map(flagTable().flatMap((r) => (r.env ? [[r.env, r]] : [])));
    const wrong: string[] = [];
    for (const s of Object.values(SETTINGS) as Setting[]) {
      const row = rows.get(s.env);
      const want = { flag: s.flag, commands: [...commandsOf(s)].sort(), defaultText: defaultText(s) };
      const got = row && { flag: row.flag, commands: row.commands, defaultText: row.defaultText };
      if (JSON.stringify(got) !== JSON.stringify(want)) wrong.push(`${s.env}: docs ${JSON.stringify(got)}, table ${JSON.stringify(want)}`);
    }
    expect(wrong).toEqual([]);
    expect(rows.size).toBe(Object.keys(SETTINGS).length);
  });

  it("shows the values a setting with a closed set takes, each in its row", () => {
    const rows = new Map(flagTable().flatMap((r) => (r.env ? [[r.env, r]] : [])));
    const missing: string[] = [];
    for (const s of Object.values(SETTINGS) as Setting[]) {
      if (!("choices" in s) || !s.choices) continue;
      for (const c of s.choices) if (!rows.get(s.env)?.text.includes(`\`${c}\``)) missing.push(`${s.env}: \`${c}\``);
    }
    expect(missing).toEqual([]);
  });

  it("names, in each reference variable's row, the setting the table maps it onto", () => {
    // The reference's table: one row per variable, `| NAME | its default | what sluice does |`.
    const page = fs.readFileSync(path.join(ROOT, "docs/configuration.md"), "utf8");
    const reference = page.slice(page.indexOf("## Reference environment variables"));
    const wrong: string[] = [];
    for (const s of Object.values(SETTINGS) as Setting[]) {
      if (!s.reference) continue;
      const row = reference.split("\n").find((l) => l.startsWith(`| \`${s.reference}\` |`));
      const named = row !== undefined && (row.includes(`\`${s.env}`) || (s.flag !== undefined && row.includes(`--${s.flag}`)));
      if (!named) wrong.push(`${s.reference} -> ${s.env}: ${row ?? "no row"}`);
    }
    expect(wrong).toEqual([]);
  });

  it("the CLI block is the usage text", () => {
    const page = fs.readFileSync(path.join(ROOT, "docs/configuration.md"), "utf8");
    const block = /^## CLI\n\n```\n([\s\S]*?)```$/m.exec(page)![1];
    const usage =
      USAGE.split("\n")
        .slice(1)
        .map((l) => l.slice(2))
        .join("\n") + "\n";
    expect(block).toBe(usage);
  });

  it("the usage text names every flag", async () => {
    const usage = USAGE;
    for (const [command, flags] of Object.entries(COMMAND_FLAGS)) {
      const line = usage.split(/\n(?=\s*sluice )/).find((l) => l.trim().startsWith(`sluice ${command}`))!;
      for (const flag of Object.keys(flags)) expect(line, `${command} --${flag}`).toContain(`--${flag}`);
    }
  });
});
