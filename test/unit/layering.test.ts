// The layers of src/, held: every import (type imports, re-exports and dynamic import() included) points
// to the importer's own layer or one below it, and no files import each other in a loop, not even within
// a layer. ARCHITECTURE.md draws the same list; a new file belongs to the layer of its folder.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const SRC = path.resolve(import.meta.dirname, "../../src");

/**
 * Bottom first: a file imports files of its own layer or of layers below it, never above. Every layer is a
 * folder of src/ (its subfolders included); "" is src/ itself, whose only file is bin.ts.
 */
const LAYERS: readonly (readonly [name: string, folder: string])[] = [
  ["core", "core/"],
  ["counters", "counters/"],
  ["rules", "rules/"],
  ["store", "store/"],
  ["approximate", "approximate/"],
  ["limiter", "limiter/"],
  // The edges, each on those below it: telemetry, the xDS client, rule inspection, the gRPC and HTTP servers,
  // RLQS, who is being limited, the settings (the reference's environment in them), the CLI and its commands.
  ["telemetry", "telemetry/"],
  ["xds", "xds/"],
  ["inspect", "inspect/"],
  ["server", "server/"],
  ["rlqs", "rlqs/"],
  ["insight", "insight/"],
  ["settings", "settings/"],
  ["cli", "cli/"],
  ["bin", ""],
];

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/** Every module specifier a file names: import/export ... from, import x = require, import(), import("x").T. */
function specifiers(file: string): string[] {
  const text = fs.readFileSync(file, "utf8");
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const e = node.moduleReference.expression;
      if (ts.isStringLiteral(e)) out.push(e.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const arg = node.arguments[0];
      if (arg && ts.isStringLiteralLike(arg)) out.push(arg.text);
      else if (arg) out.push(`<dynamic: ${arg.getText(sf)}>`);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** The src/ file a relative specifier names, or undefined for a package. */
function resolve(from: string, spec: string, known: Set<string>): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const base = path.resolve(path.dirname(from), spec);
  for (const c of [base.replace(/\.js$/, ".ts"), `${base}.ts`, path.join(base, "index.ts"), base]) if (known.has(c)) return c;
  throw new Error(`${path.relative(SRC, from)} imports ${spec}, which is no file in src/`);
}

/** The layer of a file: that of its top folder in src/ (src/ itself for a file at its top). */
function layerOf(rel: string): number {
  const slash = rel.indexOf("/");
  const folder = slash < 0 ? "" : rel.slice(0, slash + 1);
  return LAYERS.findIndex(([, f]) => f === folder);
}

function importGraph(): Map<string, Set<string>> {
  const files = sourceFiles(SRC);
  const known = new Set(files);
  const graph = new Map<string, Set<string>>();
  for (const f of files) {
    const to = new Set<string>();
    for (const s of specifiers(f)) {
      if (s.startsWith("<dynamic")) throw new Error(`${path.relative(SRC, f)}: import() of a computed name (${s}) cannot be checked`);
      const r = resolve(f, s, known);
      if (r && r !== f) to.add(path.relative(SRC, r));
    }
    graph.set(path.relative(SRC, f), to);
  }
  return graph;
}

/** Each strongly connected group of more than one file, as one loop through it: a -> b -> ... -> a. */
function cycles(graph: Map<string, Set<string>>): string[] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const groups: string[][] = [];
  const strong = (v: string): void => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const g: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        g.push(w);
      } while (w !== v);
      if (g.length > 1) groups.push(g);
    }
  };
  for (const f of [...graph.keys()].sort()) if (!idx.has(f)) strong(f);
  return groups.map((g) => {
    // The shortest loop from the group's first file back to itself (breadth first inside the group).
    const inGroup = new Set(g);
    const start = [...g].sort()[0];
    const prev = new Map<string, string>();
    const queue = [start];
    let end: string | undefined;
    while (queue.length > 0 && end === undefined) {
      const v = queue.shift()!;
      for (const w of graph.get(v) ?? []) {
        if (w === start) {
          end = v;
          break;
        }
        if (inGroup.has(w) && !prev.has(w)) {
          prev.set(w, v);
          queue.push(w);
        }
      }
    }
    const loop = [start];
    for (let v = end; v !== undefined && v !== start; v = prev.get(v)) loop.splice(1, 0, v);
    return `${loop.join(" -> ")} -> ${start} (${g.length} files in the loop's group)`;
  });
}

describe("layering of src/", () => {
  const graph = importGraph();

  it("names folders only: every layer is a folder of src/ that exists, and src/ itself holds only bin.ts", () => {
    for (const [, folder] of LAYERS) if (folder !== "") expect(fs.statSync(path.join(SRC, folder)).isDirectory()).toBe(true);
    expect(fs.readdirSync(SRC).filter((f) => f.endsWith(".ts"))).toEqual(["bin.ts"]);
  });

  it("puts every file in a layer", () => {
    expect([...graph.keys()].filter((f) => layerOf(f) < 0)).toEqual([]);
  });

  it("has imports only to the importer's own layer or one below it", () => {
    const wrong: string[] = [];
    for (const [from, tos] of graph) {
      for (const to of tos) {
        if (layerOf(to) > layerOf(from)) wrong.push(`${from} -> ${to} (${LAYERS[layerOf(from)][0]} may not import ${LAYERS[layerOf(to)][0]})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("has no import cycle, type imports included", () => {
    expect(cycles(graph)).toEqual([]);
  });

  it("reads every kind of import", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "layering-"));
    try {
      const f = path.join(dir, "x.ts");
      fs.writeFileSync(
        f,
        [
          'import a from "./a.js";',
          'import type { B } from "./b.js";',
          'export { c } from "./c.js";',
          'export * from "./d.js";',
          'const e = await import("./e.js");',
          'type F = import("./f.js").F;',
          'import g = require("./g.js");',
          'import "./h.js";',
        ].join("\n"),
      );
      expect(specifiers(f)).toEqual(["./a.js", "./b.js", "./c.js", "./d.js", "./e.js", "./f.js", "./g.js", "./h.js"]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
