// README.md and docs/: each docs page opens with a contents list that is its headings, and every link to a file
// of the repository (or a heading in it) leads somewhere, so moving a section cannot leave a dead link behind.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DOCS = fs.readdirSync(path.join(ROOT, "docs")).filter((f) => f.endsWith(".md"));
const PAGES = ["README.md", ...DOCS.map((f) => `docs/${f}`)];

/** The page's text outside fenced code blocks (a `#` there is a shell comment, not a heading). */
function prose(file: string): string[] {
  let fenced = false;
  return fs
    .readFileSync(path.join(ROOT, file), "utf8")
    .split("\n")
    .filter((line) => {
      if (line.trimStart().startsWith("```")) {
        fenced = !fenced;
        return false;
      }
      return !fenced;
    });
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(headings: string[]): string[] {
  const seen = new Map<string, number>();
  return headings.map((h) => {
    const base = h
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    return n === 0 ? base : `${base}-${n}`;
  });
}

function headings(file: string, levels = /^#{1,6} (.*)$/): { level: number; text: string; anchor: string }[] {
  const found = prose(file).flatMap((l) => {
    const m = levels.exec(l);
    return m ? [{ level: l.indexOf(" "), text: m[1] }] : [];
  });
  const ids = anchors(found.map((h) => h.text));
  return found.map((h, i) => ({ ...h, anchor: ids[i] }));
}

describe("docs pages", () => {
  it.each(DOCS)("docs/%s opens with a contents list of its sections", (file) => {
    const lines = prose(`docs/${file}`);
    const start = lines.indexOf("**Contents**");
    expect(start, "a **Contents** line").toBeGreaterThan(0);
    const after = lines.slice(start + 2);
    const end = after.findIndex((l) => !l.trimStart().startsWith("- "));
    const listed = end < 0 ? after : after.slice(0, end);
    const expected = headings(`docs/${file}`)
      .filter((h) => h.level === 2 || h.level === 3)
      .map((h) => `${h.level === 3 ? "  " : ""}- [${h.text}](#${h.anchor})`);
    expect(listed).toEqual(expected);
  });

  it.each(PAGES)("every repository link of %s leads to a file, and to a heading there", (file) => {
    const dead: string[] = [];
    for (const line of prose(file)) {
      for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1];
        if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
        const [rel, anchor] = target.split("#");
        const linked = rel === "" ? file : path.normalize(path.join(path.dirname(file), rel));
        if (!fs.existsSync(path.join(ROOT, linked))) {
          dead.push(`${target}: no file ${linked}`);
          continue;
        }
        if (anchor !== undefined && linked.endsWith(".md") && !headings(linked).some((h) => h.anchor === anchor)) {
          dead.push(`${target}: no heading #${anchor} in ${linked}`);
        }
      }
    }
    expect(dead).toEqual([]);
  });
});
