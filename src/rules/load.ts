// Loads envoyproxy/ratelimit rule files into the compiled model, validating more strictly than the
// reference. Every error carries file, line and descriptor path; all errors of a file are reported.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node, type Pair, type YAMLMap } from "yaml";
import { descriptorPath } from "../limiter/descriptor-path.js";
import { limitTag } from "../limiter/keys.js";
import { compileGlob } from "./glob.js";
import type { Algorithm, DomainRules, FailureMode, Limit, QuotaPeriod, RuleError, RuleLevel, RuleNode, RuleSet, Unit } from "./model.js";
import { levelNodes, UNIT_SECONDS } from "./model.js";

export interface LoadOptions {
  mergeDomains: boolean;
}

export interface LoadResult {
  rules?: RuleSet;
  errors: RuleError[];
  warnings: string[];
}

const TOP_KEYS = new Set(["domain", "descriptors", "failure_mode"]);
const DESCRIPTOR_KEYS = new Set([
  "key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric",
  "value_to_metric", "share_threshold", "metadata", "quota_mode",
  // sluice extensions
  "rate_limits", "quota", "failure_mode",
]);
const RATE_LIMIT_KEYS = new Set(["unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "burst"]);
const QUOTA_KEYS = new Set(["period", "limit", "name"]);
const REPLACES_KEYS = new Set(["name"]);
const ALGORITHMS = new Set<string>(["fixed_window", "token_bucket"]);
const FAILURE_MODES = new Set<string>(["allow", "deny", "local"]);
const QUOTA_PERIODS = new Set<string>(["day", "month"]);
const MAX_UINT32 = 4294967295;

interface Ctx {
  file: string;
  doc: Document;
  lc: LineCounter;
  errors: RuleError[];
}

/** One file's domain, before files are combined. */
interface FileRules {
  domain: string;
  domainLine: number;
  root: RuleLevel;
  ruleCount: number;
  failureMode: FailureMode;
}

/** A parsed limit before the descriptor-wide settings (shadow_mode, failure_mode, ...) are added. */
type BaseLimit = Omit<Limit, "shadowMode" | "detailedMetric" | "valueToMetric" | "quotaMode" | "failureMode" | "keyTag">;

export function emptyLevel(): RuleLevel {
  return { exact: new Map(), wildcards: new Map(), keyOnly: new Map() };
}

function lineOf(ctx: Ctx, node: Node | null | undefined, fallback = 1): number {
  const at = node?.range?.[0];
  return at === undefined ? fallback : ctx.lc.linePos(at).line;
}

function fail(ctx: Ctx, line: number, path: string, message: string): void {
  ctx.errors.push({ file: ctx.file, line, path, message });
}

function deref(ctx: Ctx, node: unknown): Node | null {
  if (isAlias(node)) return (node.resolve(ctx.doc) as Node | undefined) ?? null;
  return (node as Node | null) ?? null;
}

function isNull(node: Node | null): boolean {
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
function fields(ctx: Ctx, map: YAMLMap, allowed: Set<string>, path: string): Map<string, { node: Node | null; line: number }> {
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

type Field = { node: Node | null; line: number } | undefined;

/** A string field; ints and bools read as their source text like the reference's yaml.v2 does. */
function str(ctx: Ctx, f: Field, name: string, path: string): string | undefined {
  if (!f || isNull(f.node)) return undefined;
  const n = f.node!;
  if (isScalar(n)) {
    if (typeof n.value === "string") return n.value;
    if (typeof n.value === "boolean" || isInteger(n)) return text(n);
  }
  fail(ctx, lineOf(ctx, n, f.line), path, `error checking config: '${name}' must be a string, got ${describe(n)}`);
  return undefined;
}

function bool(ctx: Ctx, f: Field, name: string, path: string): boolean | undefined {
  if (!f || isNull(f.node)) return undefined;
  const n = f.node!;
  if (isScalar(n) && typeof n.value === "boolean") return n.value;
  fail(ctx, lineOf(ctx, n, f.line), path, `error checking config: '${name}' must be true or false, got ${describe(n)}`);
  return undefined;
}

function isInteger(n: Node): boolean {
  if (!isScalar(n) || typeof n.value !== "number" || !Number.isSafeInteger(n.value)) return false;
  // 1.0 parses to the number 1; the source tells floats apart.
  return n.format === "HEX" || n.format === "OCT" || /^[-+]?[0-9]+$/.test(n.source ?? "");
}

function int(ctx: Ctx, f: Field, name: string, path: string, min: number): number | undefined {
  if (!f || isNull(f.node)) return undefined;
  const n = f.node!;
  if (isInteger(n)) {
    const v = (n as { value: number }).value;
    if (v >= min && v <= MAX_UINT32) return v;
  }
  fail(ctx, lineOf(ctx, n, f.line), path, `error checking config: '${name}' must be an integer >= ${min}, got ${describe(n)}`);
  return undefined;
}

/** A list item shown as the reference does (bare scalar text). */
function listItem(n: Node | null): string {
  if (n === null) return "null";
  return isScalar(n) ? text(n) : describe(n);
}

function describe(n: Node): string {
  if (isMap(n)) return "a map";
  if (isSeq(n)) return "a list";
  return isScalar(n) && typeof n.value === "string" ? `'${n.value}'` : text(n);
}

function parseRateLimit(ctx: Ctx, f: NonNullable<Field>, path: string, line: number, label: string): BaseLimit | undefined {
  const before = ctx.errors.length;
  const map = f.node;
  if (!isMap(map)) {
    fail(ctx, lineOf(ctx, map, f.line), path, `${label} must be a map`);
    return undefined;
  }
  const fl = fields(ctx, map, RATE_LIMIT_KEYS, path);
  const unlimitedAt = ctx.errors.length;
  const unlimited = bool(ctx, fl.get("unlimited"), "unlimited", path) ?? false;
  // A broken `unlimited` leaves the intent unknown: don't pile on unit/count errors.
  const intentKnown = ctx.errors.length === unlimitedAt;
  const unitText = str(ctx, fl.get("unit"), "unit", path);
  const rpu = int(ctx, fl.get("requests_per_unit"), "requests_per_unit", path, 0);
  const name = str(ctx, fl.get("name"), "name", path) ?? "";
  const algorithmText = str(ctx, fl.get("algorithm"), "algorithm", path);
  const burst = int(ctx, fl.get("burst"), "burst", path, 1);
  const replaces = parseReplaces(ctx, fl.get("replaces"), name, path);
  const at = (k: string) => fl.get(k)?.line ?? line;

  let unit: Unit = "second";
  if (unlimited) {
    // The reference only rejects a valid unit here; any unit or count beside unlimited is a mistake.
    if (fl.has("unit")) fail(ctx, at("unit"), path, "should not specify rate limit unit when unlimited");
    if (fl.has("requests_per_unit")) fail(ctx, at("requests_per_unit"), path, "should not specify requests_per_unit when unlimited");
    if (fl.has("algorithm")) fail(ctx, at("algorithm"), path, "should not specify algorithm when unlimited");
    if (fl.has("burst")) fail(ctx, at("burst"), path, "should not specify burst when unlimited");
  } else if (intentKnown) {
    if (unitText === undefined) {
      if (!fl.has("unit") || isNull(fl.get("unit")!.node)) fail(ctx, f.line, path, "rate limit unit must be set (invalid rate limit unit '')");
    } else if (Object.hasOwn(UNIT_SECONDS, unitText.toLowerCase())) {
      unit = unitText.toLowerCase() as Unit;
    } else {
      fail(ctx, at("unit"), path, `invalid rate limit unit '${unitText}'`);
    }
    // The reference defaults a missing count to 0 (block everything); demand it spelled out.
    if (!fl.has("requests_per_unit")) fail(ctx, f.line, path, "requests_per_unit must be set (use 0 to block all requests)");
  }
  let algorithm: Algorithm = "fixed_window";
  if (algorithmText !== undefined) {
    if (ALGORITHMS.has(algorithmText)) algorithm = algorithmText as Algorithm;
    else fail(ctx, at("algorithm"), path, `invalid algorithm '${algorithmText}' (expected fixed_window or token_bucket)`);
  }
  if (fl.has("burst") && !unlimited && algorithm !== "token_bucket" && (algorithmText === undefined || ALGORITHMS.has(algorithmText))) {
    fail(ctx, at("burst"), path, "burst can only be used with algorithm token_bucket");
  }
  if (ctx.errors.length > before) return undefined;
  const requestsPerUnit = unlimited ? 0 : rpu ?? 0;
  return {
    path,
    label,
    source: { file: ctx.file, line },
    unit,
    requestsPerUnit,
    burst: burst ?? requestsPerUnit,
    algorithm,
    unlimited,
    name,
    replaces,
  };
}

/** `rate_limits: [ {...}, ... ]`: several rate limits on one descriptor, all checked together. */
function parseRateLimitList(ctx: Ctx, f: NonNullable<Field>, path: string): BaseLimit[] {
  if (!isSeq(f.node)) {
    fail(ctx, lineOf(ctx, f.node, f.line), path, "rate_limits must be a list of rate limits");
    return [];
  }
  const out: BaseLimit[] = [];
  f.node.items.forEach((raw, i) => {
    const item = deref(ctx, raw);
    const at = lineOf(ctx, item, f.line);
    const limit = parseRateLimit(ctx, { node: item, line: at }, path, at, `rate_limits[${i}]`);
    if (!limit) return;
    if (limit.unlimited) fail(ctx, at, path, "rate_limits entries cannot be unlimited (use rate_limit: {unlimited: true} alone)");
    else out.push(limit);
  });
  if (f.node.items.length === 0) fail(ctx, f.line, path, "rate_limits must not be empty");
  return out;
}

/** `quota: {period: day | month, limit: N}`: a calendar total in UTC, next to the rate limits. */
function parseQuota(ctx: Ctx, f: NonNullable<Field>, path: string): BaseLimit | undefined {
  const before = ctx.errors.length;
  const map = f.node;
  if (!isMap(map)) {
    fail(ctx, lineOf(ctx, map, f.line), path, "quota must be a map with period and limit");
    return undefined;
  }
  const line = lineOf(ctx, map, f.line);
  const fl = fields(ctx, map, QUOTA_KEYS, path);
  const periodText = str(ctx, fl.get("period"), "period", path);
  const limit = int(ctx, fl.get("limit"), "limit", path, 0);
  const name = str(ctx, fl.get("name"), "name", path) ?? "";
  if (periodText === undefined) {
    if (!fl.has("period")) fail(ctx, f.line, path, "quota period must be set (day or month)");
  } else if (!QUOTA_PERIODS.has(periodText)) {
    fail(ctx, fl.get("period")!.line, path, `invalid quota period '${periodText}' (expected day or month)`);
  }
  if (!fl.has("limit")) fail(ctx, f.line, path, "quota limit must be set");
  if (ctx.errors.length > before) return undefined;
  const period = periodText as QuotaPeriod;
  return {
    path,
    label: "quota",
    source: { file: ctx.file, line },
    unit: period,
    requestsPerUnit: limit!,
    burst: limit!,
    algorithm: "quota",
    period,
    unlimited: false,
    name,
    replaces: [],
  };
}

function parseFailureMode(ctx: Ctx, f: Field, path: string): FailureMode | undefined {
  const text = str(ctx, f, "failure_mode", path);
  if (text === undefined) return undefined;
  if (FAILURE_MODES.has(text)) return text as FailureMode;
  fail(ctx, f!.line, path, `invalid failure_mode '${text}' (expected allow, deny or local)`);
  return undefined;
}

/** The last part of each limit's store key; two limits of one descriptor must not share one. */
function keyTags(ctx: Ctx, limits: BaseLimit[], path: string): string[] | undefined {
  const buckets = limits.filter((l) => l.algorithm === "token_bucket").length;
  const tags: string[] = [];
  const seen = new Map<string, BaseLimit>();
  for (const l of limits) {
    const seconds = UNIT_SECONDS[l.unit];
    const tag = l.algorithm === "quota" ? limitTag("q") : l.algorithm === "token_bucket" ? (buckets > 1 ? limitTag("tb", seconds) : limitTag("tb")) : limitTag("fw", seconds);
    const other = seen.get(tag);
    if (other) {
      fail(ctx, l.source.line, path, `${other.label} and ${l.label} are both ${l.algorithm} per ${l.unit}: keep the stricter one`);
      return undefined;
    }
    seen.set(tag, l);
    tags.push(tag);
  }
  return tags;
}

function parseReplaces(ctx: Ctx, f: Field, ownName: string, path: string): string[] {
  if (!f || isNull(f.node)) return [];
  const seq = f.node;
  if (!isSeq(seq)) {
    fail(ctx, lineOf(ctx, seq, f.line), path, "replaces must be a list of {name: ...}");
    return [];
  }
  const names: string[] = [];
  for (const raw of seq.items) {
    const item = deref(ctx, raw);
    const line = lineOf(ctx, item, f.line);
    if (!isMap(item)) {
      fail(ctx, line, path, `config error, yaml file contains list of type other than map: ${listItem(item)}`);
      continue;
    }
    const name = str(ctx, fields(ctx, item, REPLACES_KEYS, path).get("name"), "name", path);
    if (!name) fail(ctx, line, path, "should not have an empty replaces entry");
    else if (name === ownName) fail(ctx, line, path, "replaces should not contain name of same descriptor");
    else names.push(name);
  }
  return names;
}

/** Inserts node into level unless the same key and value is already there; returns false on a duplicate. */
function insert(level: RuleLevel, node: RuleNode): boolean {
  if (node.value === "") {
    if (level.keyOnly.has(node.key)) return false;
    level.keyOnly.set(node.key, node);
  } else if (node.wildcard) {
    const list = level.wildcards.get(node.key);
    if (!list) level.wildcards.set(node.key, [node]);
    else if (list.some((n) => n.value === node.value)) return false;
    else list.push(node);
  } else {
    let values = level.exact.get(node.key);
    if (!values) level.exact.set(node.key, (values = new Map()));
    if (values.has(node.value)) return false;
    values.set(node.value, node);
  }
  return true;
}

/** Parses a descriptors list into level; returns the number of limits added. */
function parseDescriptors(ctx: Ctx, f: Field, level: RuleLevel, parentPath: string, failureMode: FailureMode): number {
  if (!f || isNull(f.node)) return 0;
  const seq = f.node;
  if (!isSeq(seq)) {
    fail(ctx, lineOf(ctx, seq, f.line), parentPath, "descriptors must be a list of maps");
    return 0;
  }
  let count = 0;
  for (const raw of seq.items) {
    const item = deref(ctx, raw);
    if (!isMap(item)) {
      fail(ctx, lineOf(ctx, item, f.line), parentPath, `config error, yaml file contains list of type other than map: ${listItem(item)}`);
      continue;
    }
    count += parseDescriptor(ctx, item, level, parentPath, failureMode);
  }
  return count;
}

function parseDescriptor(ctx: Ctx, map: YAMLMap, level: RuleLevel, parentPath: string, inheritedMode: FailureMode): number {
  // Key and value first: every later error names the descriptor path.
  const keyPair = (map.items as Pair<unknown, unknown>[]).find((p) => isScalar(p.key) && p.key.value === "key");
  const mapLine = lineOf(ctx, map);
  const line = keyPair ? lineOf(ctx, keyPair.key as Node, mapLine) : mapLine;
  const first = ctx.errors.length;
  const fl = fields(ctx, map, DESCRIPTOR_KEYS, parentPath);
  const key = str(ctx, fl.get("key"), "key", parentPath) ?? "";
  const value = str(ctx, fl.get("value"), "value", parentPath) ?? "";
  const path = key === "" ? parentPath : descriptorPath(parentPath, key, value);
  for (let i = first; i < ctx.errors.length; i++) ctx.errors[i].path = path;
  if (key === "") fail(ctx, line, parentPath, "descriptor has empty key");

  const before = ctx.errors.length;
  const wildcard = value.includes("*");
  const shareThreshold = bool(ctx, fl.get("share_threshold"), "share_threshold", path) ?? false;
  if (shareThreshold && !wildcard) {
    fail(ctx, fl.get("share_threshold")!.line, path,
      `share_threshold can only be used with wildcard values (containing '*'), but found key '${path}'`);
  }
  const shadowMode = bool(ctx, fl.get("shadow_mode"), "shadow_mode", path) ?? false;
  const detailedMetric = bool(ctx, fl.get("detailed_metric"), "detailed_metric", path) ?? false;
  const valueToMetric = bool(ctx, fl.get("value_to_metric"), "value_to_metric", path) ?? false;
  const quotaMode = bool(ctx, fl.get("quota_mode"), "quota_mode", path) ?? false;
  let metadata: Record<string, unknown> | undefined;
  const md = fl.get("metadata");
  if (md && !isNull(md.node)) {
    if (isMap(md.node)) metadata = md.node.toJS(ctx.doc) as Record<string, unknown>;
    else fail(ctx, lineOf(ctx, md.node, md.line), path, "error parsing metadata: metadata must be a map");
  }
  const failureMode = parseFailureMode(ctx, fl.get("failure_mode"), path) ?? inheritedMode;
  const bases = parseLimits(ctx, fl, path, line);
  const tags = keyTags(ctx, bases, path);

  const node: RuleNode = {
    key,
    value,
    wildcard,
    shareThreshold,
    detailedMetric,
    valueToMetric,
    children: emptyLevel(),
    source: { file: ctx.file, line },
    limits: [],
  };
  if (wildcard) node.match = compileGlob(value);
  if (metadata) node.metadata = metadata;
  if (tags) {
    node.limits = bases.map((b, i) => ({ ...b, keyTag: tags[i], failureMode, shadowMode, detailedMetric, valueToMetric, quotaMode }));
  }
  let count = parseDescriptors(ctx, fl.get("descriptors"), node.children, path, failureMode);
  if (key === "" || ctx.errors.length > before) return 0;
  if (!insert(level, node)) {
    fail(ctx, line, path, `duplicate descriptor composite key '${path}'`);
    return 0;
  }
  if (node.limits.length > 0) count++;
  return count;
}

/** rate_limit, rate_limits and quota of one descriptor, in that order. */
function parseLimits(ctx: Ctx, fl: Map<string, { node: Node | null; line: number }>, path: string, line: number): BaseLimit[] {
  const out: BaseLimit[] = [];
  const one = fl.get("rate_limit");
  const list = fl.get("rate_limits");
  const quota = fl.get("quota");
  if (one && list) fail(ctx, list.line, path, "use either rate_limit or rate_limits, not both");
  const single = one ? parseRateLimit(ctx, one, path, line, "rate_limit") : undefined;
  if (single) out.push(single);
  if (list && !isNull(list.node)) out.push(...parseRateLimitList(ctx, list, path));
  if (quota && !isNull(quota.node)) {
    const q = parseQuota(ctx, quota, path);
    if (q) out.push(q);
  }
  if (single?.unlimited && quota) fail(ctx, quota.line, path, "an unlimited descriptor cannot have a quota");
  return out;
}

function parseFile(name: string, source: string, errors: RuleError[]): FileRules | undefined {
  const lc = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lc, prettyErrors: false });
  const ctx: Ctx = { file: name, doc, lc, errors: [] };
  for (const e of doc.errors) {
    fail(ctx, lc.linePos(e.pos[0]).line, "", `error loading config file: ${e.message}`);
  }
  if (ctx.errors.length === 0) {
    const top = deref(ctx, doc.contents);
    if (isNull(top)) {
      fail(ctx, 1, "", "config file cannot have empty domain");
    } else if (!isMap(top)) {
      fail(ctx, lineOf(ctx, top), "", "config error, the file must be a map with 'domain' and 'descriptors'");
    } else {
      const fl = fields(ctx, top, TOP_KEYS, "");
      const domainField = fl.get("domain");
      const domain = str(ctx, domainField, "domain", "") ?? "";
      for (const e of ctx.errors) e.path = domain;
      const domainLine = domainField?.line ?? lineOf(ctx, top);
      if (!domainField || isNull(domainField.node) || (isScalar(domainField.node) && domainField.node.value === "")) {
        fail(ctx, domainLine, "", "config file cannot have empty domain");
      }
      const failureMode = parseFailureMode(ctx, fl.get("failure_mode"), domain) ?? "allow";
      const root = emptyLevel();
      const ruleCount = parseDescriptors(ctx, fl.get("descriptors"), root, domain, failureMode);
      if (ctx.errors.length === 0) return { domain, domainLine, root, ruleCount, failureMode };
    }
  }
  // Stable sort keeps the order of errors found on one line.
  ctx.errors.sort((a, b) => a.line - b.line);
  errors.push(...ctx.errors);
  return undefined;
}

/** Adds a later file's top level into an earlier one's (mergeDomains); duplicates are errors of the later file. */
function mergeInto(target: DomainRules, from: FileRules, file: string, errors: RuleError[]): void {
  for (const n of levelNodes(from.root)) {
    if (insert(target.root, n)) continue;
    const path = descriptorPath(from.domain, n.key, n.value);
    errors.push({ file, line: n.source.line, path, message: `duplicate descriptor composite key '${path}'` });
  }
  target.ruleCount += from.ruleCount;
  target.files.push(file);
}

/** Loads rule files given as text, in the given order (pure; for tests and for loadRuleDir). */
export function loadRuleFiles(files: { name: string; text: string }[], opts: LoadOptions): LoadResult {
  const errors: RuleError[] = [];
  const warnings: string[] = [];
  const domains = new Map<string, DomainRules>();
  for (const f of files) {
    const parsed = parseFile(f.name, f.text, errors);
    if (!parsed) continue;
    const existing = domains.get(parsed.domain);
    if (!existing) {
      domains.set(parsed.domain, {
        domain: parsed.domain,
        files: [f.name],
        root: parsed.root,
        ruleCount: parsed.ruleCount,
        failureMode: parsed.failureMode,
      });
    } else if (opts.mergeDomains) {
      mergeInto(existing, parsed, f.name, errors);
    } else {
      errors.push({
        file: f.name,
        line: parsed.domainLine,
        path: parsed.domain,
        message: `duplicate domain '${parsed.domain}' in config file (also in ${existing.files.join(", ")})`,
      });
    }
  }
  if (errors.length > 0) return { errors, warnings };
  return { rules: { domains }, errors, warnings };
}

/** Loads the top-level *.yaml / *.yml files of dir (symlinks followed; dot-files and sub-directories skipped), by name. */
export function loadRuleDir(dir: string, opts: LoadOptions): LoadResult {
  const dirError = (message: string): LoadResult => ({ errors: [{ file: dir, line: 0, path: "", message }], warnings: [] });
  let names: string[];
  try {
    if (!statSync(dir).isDirectory()) return dirError("rule directory is not a directory");
    names = readdirSync(dir);
  } catch (e) {
    return dirError(`cannot read rule directory: ${(e as Error).message}`);
  }
  const files: { name: string; text: string }[] = [];
  const readErrors: RuleError[] = [];
  for (const name of names.sort()) {
    if (name.startsWith(".") || !/\.ya?ml$/.test(name)) continue;
    const file = join(dir, name);
    try {
      // statSync follows symlinks, so a link to a rule file counts as a rule file.
      if (!statSync(file).isFile()) continue;
      files.push({ name: file, text: readFileSync(file, "utf8") });
    } catch (e) {
      readErrors.push({ file, line: 0, path: "", message: `cannot read rule file: ${(e as Error).message}` });
    }
  }
  const result = loadRuleFiles(files, opts);
  if (readErrors.length > 0) {
    result.errors.unshift(...readErrors);
    delete result.rules;
  }
  if (files.length === 0 && readErrors.length === 0) result.warnings.push(`no rule files (*.yaml, *.yml) in ${dir}`);
  return result;
}
