// YAML schema helpers for the rule loader: typed fields read from the parsed document, each mistake
// recorded with its file, line and descriptor path in the reference's words.
import { isAlias, isMap, isScalar, isSeq, type Alias, type Document, type LineCounter, type Node, type Pair, type YAMLMap } from "yaml";

const MAX_UINT32 = 4294967295;

/** A rule error: file, line, descriptor path and message; printed as `FILE:LINE: path: message`. */
export interface RuleError {
  file: string;
  line: number;
  path: string;
  message: string;
}

export interface Ctx {
  file: string;
  doc: Document;
  lc: LineCounter;
  errors: RuleError[];
  /** Every alias's target, resolved once (core/yaml-aliases.ts); absent: the document has none. */
  aliases?: Map<Alias, Node | undefined>;
}

export function lineOf(ctx: Ctx, node: Node | null | undefined, fallback = 1): number {
  const at = node?.range?.[0];
  return at === undefined ? fallback : ctx.lc.linePos(at).line;
}

export function fail(ctx: Ctx, line: number, path: string, message: string): void {
  ctx.errors.push({ file: ctx.file, line, path, message });
}

export function deref(ctx: Ctx, node: unknown): Node | null {
  if (isAlias(node)) return (ctx.aliases ? ctx.aliases.get(node) : (node.resolve(ctx.doc) as Node | undefined)) ?? null;
  return (node as Node | null) ?? null;
}

export function isNull(node: Node | null): boolean {
  return node === null || (isScalar(node) && node.value === null);
}

function text(node: Node): string {
  if (isScalar(node)) return node.source ?? String(node.value);
  return String(node);
}

/**
 * The pairs of a map by key name; keys that are not strings or not allowed here are errors
 * (reference texts). Returns the value node and the line of each key.
 */
export function fields(ctx: Ctx, map: YAMLMap, allowed: Set<string>, path: string): Map<string, { node: Node | null; line: number }> {
  const out = new Map<string, { node: Node | null; line: number }>();
  for (const pair of map.items as Pair<unknown, unknown>[]) {
    const keyNode = deref(ctx, pair.key);
    const line = lineOf(ctx, keyNode, lineOf(ctx, map));
    if (!isScalar(keyNode) || typeof keyNode.value !== "string") {
      const shown = keyNode === null ? "null" : text(keyNode);
      fail(ctx, line, path, `config error, key is not of type string: ${shown}`);
      continue;
    }
    if (!allowed.has(keyNode.value)) {
      fail(ctx, line, path, `config error, unknown key '${keyNode.value}'`);
      continue;
    }
    out.set(keyNode.value, { node: deref(ctx, pair.value), line });
  }
  return out;
}

export type Field = { node: Node | null; line: number } | undefined;

/** A string field; ints and bools read as their source text like the reference's yaml.v2 does. */
export function str(ctx: Ctx, f: Field, name: string, path: string): string | undefined {
  if (!f || isNull(f.node)) return undefined;
  const n = f.node!;
  if (isScalar(n)) {
    if (typeof n.value === "string") return n.value;
    if (typeof n.value === "boolean" || isInteger(n)) return text(n);
  }
  fail(ctx, lineOf(ctx, n, f.line), path, `error checking config: '${name}' must be a string, got ${describe(n)}`);
  return undefined;
}

export function bool(ctx: Ctx, f: Field, name: string, path: string): boolean | undefined {
  if (!f || isNull(f.node)) return undefined;
  const n = f.node!;
  if (isScalar(n) && typeof n.value === "boolean") return n.value;
  fail(ctx, lineOf(ctx, n, f.line), path, `error checking config: '${name}' must be true or false, got ${describe(n)}`);
  return undefined;
}

function isInteger(n: Node): boolean {
  if (!isScalar(n) || typeof n.value !== "number" || !Number.isSafeInteger(n.value)) return false;
  // 1.0 parses to the number 1; the source tells floats apart. A node made from data (xDS) has no source: its number is what was sent.
  if (n.source === undefined && n.range === undefined) return true;
  return n.format === "HEX" || n.format === "OCT" || /^[-+]?[0-9]+$/.test(n.source ?? "");
}

export function int(ctx: Ctx, f: Field, name: string, path: string, min: number): number | undefined {
  return intWithin(ctx, f, name, path, min, MAX_UINT32, `>= ${min}`);
}

/** An integer field from min to max; the error names the range. */
export function intInRange(ctx: Ctx, f: Field, name: string, path: string, min: number, max: number): number | undefined {
  return intWithin(ctx, f, name, path, min, max, `from ${min} to ${max}`);
}

function intWithin(ctx: Ctx, f: Field, name: string, path: string, min: number, max: number, range: string): number | undefined {
  if (!f || isNull(f.node)) return undefined;
  const n = f.node!;
  if (isInteger(n)) {
    const v = (n as { value: number }).value;
    if (v >= min && v <= max) return v;
  }
  fail(ctx, lineOf(ctx, n, f.line), path, `error checking config: '${name}' must be an integer ${range}, got ${describe(n)}`);
  return undefined;
}

/** A list item shown as the reference does (bare scalar text). */
export function listItem(n: Node | null): string {
  if (n === null) return "null";
  return isScalar(n) ? text(n) : describe(n);
}

function describe(n: Node): string {
  if (isMap(n)) return "a map";
  if (isSeq(n)) return "a list";
  return isScalar(n) && typeof n.value === "string" ? `'${n.value}'` : text(n);
}
