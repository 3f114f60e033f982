// The admin-port examples of README.md and docs/ (`$ curl -s localhost:8080/PATH` blocks) are what `npm start`
// answers: the shipped rules (config/), the memory store. In an example, the string "…" stands for any value,
// and an array ending in "…" for that array's first elements (more may follow).
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type SluiceProcess, startSluice } from "../helpers/sluice.js";

interface Example {
  file: string;
  path: string;
  shown: unknown;
}

/** Every `$ curl -s localhost:8080/PATH` block (indented ones inside list items too) with the JSON it shows. */
function examples(): Example[] {
  const files = ["README.md", ...fs.readdirSync(path.join(ROOT, "docs")).map((f) => `docs/${f}`)].filter((f) => f.endsWith(".md"));
  return files.flatMap((file) => {
    const text = fs.readFileSync(path.join(ROOT, file), "utf8");
    return [...text.matchAll(/^( *)```\n\1\$ curl -s localhost:8080(\/\S*)\n([\s\S]*?)\n\1```$/gm)].map((m) => {
      const body = m[3]
        .split("\n")
        .map((l) => l.slice(m[1].length))
        .join("\n");
      return { file, path: m[2], shown: JSON.parse(body) };
    });
  });
}

/** Holds `actual` to `shown`, naming where in the JSON they part. */
function expectShown(shown: unknown, actual: unknown, at: string): void {
  if (shown === "…") return;
  if (Array.isArray(shown)) {
    expect(Array.isArray(actual), `${at} is an array`).toBe(true);
    const list = actual as unknown[];
    const open = shown.at(-1) === "…";
    const fixed = open ? shown.slice(0, -1) : shown;
    if (open) expect(list.length, `${at}: at least the ${fixed.length} shown`).toBeGreaterThanOrEqual(fixed.length);
    else expect(list.length, `${at}: length`).toBe(fixed.length);
    for (const [i, item] of fixed.entries()) expectShown(item, list[i], `${at}[${i}]`);
    return;
  }
  if (shown !== null && typeof shown === "object") {
    expect(actual !== null && typeof actual === "object" && !Array.isArray(actual), `${at} is an object`).toBe(true);
    const obj = actual as Record<string, unknown>;
    expect(Object.keys(obj).sort(), `${at}: keys`).toEqual(Object.keys(shown).sort());
    for (const [k, v] of Object.entries(shown)) expectShown(v, obj[k], `${at}.${k}`);
    return;
  }
  expect(actual, at).toEqual(shown);
}

describe("the admin-port examples in README.md and docs/", () => {
  const found = examples();
  let sluice: SluiceProcess;
  beforeAll(async () => {
    // What `npm start` serves (config/, no --redis), on free ports.
    sluice = await startSluice([]);
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("include /readyz and /rules", () => {
    expect(found.map((e) => e.path).sort()).toEqual(["/readyz", "/rules"]);
  });

  it.each(found.map((e) => [`${e.file} ${e.path}`, e] as const))("%s is what npm start answers", async (_name, example) => {
    const res = await fetch(`http://127.0.0.1:${sluice.adminPort}${example.path}`);
    expect(res.status).toBe(200);
    expectShown(example.shown, await res.json(), example.path);
  });
});
