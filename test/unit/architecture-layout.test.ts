// ARCHITECTURE.md's Layout block lists the folders of src/: every top-level folder is there and no folder listed
// is missing from src/ (a nested entry, such as server/'s "  grpc/", names a folder under the entry above it).
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const SRC = path.join(ROOT, "src");

/** The folders the Layout block lists under src/, as paths relative to src/ ("server/grpc/"), in order. */
function layoutFolders(markdown: string): string[] {
  const section = markdown.slice(markdown.indexOf("## Layout"));
  const block = section.slice(section.indexOf("```") + 3, section.indexOf("```", section.indexOf("```") + 3));
  const lines = block.split("\n");
  const start = lines.indexOf("src/");
  if (start < 0) throw new Error("ARCHITECTURE.md's Layout block has no src/ line");
  const out: string[] = [];
  const parents: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith("  ")) break; // the next top-level entry (test/, bench/) ends src/'s list
    // An entry: two spaces per level, then a name ending in "/" and the description's gap.
    const m = /^((?: {2})+)([a-z0-9_-]+\/)(?: {2,}|$)/.exec(line);
    if (!m) continue;
    const level = m[1].length / 2 - 1;
    if (level > parents.length) throw new Error(`'${m[2]}' is nested under no entry`);
    parents.length = level;
    const folder = parents.join("") + m[2];
    parents.push(m[2]);
    out.push(folder);
  }
  return out;
}

const dirs = (dir: string): string[] =>
  fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => `${e.name}/`)
    .sort();

describe("ARCHITECTURE.md's folder list", () => {
  const listed = layoutFolders(fs.readFileSync(path.join(ROOT, "ARCHITECTURE.md"), "utf8"));

  it("lists every folder of src/", () => {
    expect(dirs(SRC).filter((d) => !listed.includes(d))).toEqual([]);
  });

  it("lists no folder that src/ does not hold", () => {
    expect(listed.filter((d) => !fs.existsSync(path.join(SRC, d)) || !fs.statSync(path.join(SRC, d)).isDirectory())).toEqual([]);
  });

  it("reads top-level and nested entries, and not the descriptions' words", () => {
    const md = [
      "## Layout",
      "```",
      "lua/  x",
      "src/",
      "  a/           one",
      "    b/         two",
      "                 c/ wrapped words",
      "  d/           three",
      "test/  t",
      "```",
    ].join("\n");
    expect(layoutFolders(md)).toEqual(["a/", "a/b/", "d/"]);
  });
});
