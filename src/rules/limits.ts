// A descriptor's limits: rate_limit, rate_limits and quota read and checked against the algorithm
// registry, its failure_mode and replaces, and each limit's store key tag.
import { isMap, isSeq, type Node } from "yaml";
import type { BaseLimit as AnyBaseLimit } from "../counters/limit.js";
import { algorithm, ALGORITHMS, DEFAULT_ALGORITHM, RATE_LIMIT_ALGORITHMS, type AlgorithmName } from "../counters/registry.js";
import { parseApproximate } from "./approximate.js";
import type { FailureMode, Unit } from "./model.js";
import { UNIT_SECONDS } from "./model.js";
import { bool, deref, fail, fields, int, isNull, lineOf, listItem, str, type Ctx, type Field } from "../core/yaml-fields.js";

/** rate_limit keys of one algorithm or another (token_bucket's burst), from the registry. */
const OWN_KEYS = ALGORITHMS.filter((a) => a.rule.inRateLimit).flatMap((a) => a.rule.ownKeys);
const RATE_LIMIT_KEYS = new Set(["unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "approximate", ...OWN_KEYS.map((k) => k.key)]);
const REPLACES_KEYS = new Set(["name"]);
export const FAILURE_MODES: readonly FailureMode[] = ["allow", "deny", "local", "error"];

/** A parsed limit before the descriptor-wide settings (shadow_mode, failure_mode, ...) are added. */
export type BaseLimit = AnyBaseLimit<AlgorithmName>;

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
  const own = new Map<string, number>();
  for (const k of OWN_KEYS) {
    const v = int(ctx, fl.get(k.key), k.key, path, k.min);
    if (v !== undefined) own.set(k.key, v);
  }
  const approximateField = fl.get("approximate");
  const approximate = approximateField && parseApproximate(ctx, approximateField, path);
  const replaces = parseReplaces(ctx, fl.get("replaces"), name, path);
  const at = (k: string) => fl.get(k)?.line ?? line;

  let unit: Unit = "second";
  if (unlimited) {
    // The reference only rejects a valid unit here; any unit or count beside unlimited is a mistake.
    if (fl.has("unit")) fail(ctx, at("unit"), path, "should not specify rate limit unit when unlimited");
    if (fl.has("requests_per_unit")) fail(ctx, at("requests_per_unit"), path, "should not specify requests_per_unit when unlimited");
    if (fl.has("algorithm")) fail(ctx, at("algorithm"), path, "should not specify algorithm when unlimited");
    for (const k of OWN_KEYS) if (fl.has(k.key)) fail(ctx, at(k.key), path, `should not specify ${k.key} when unlimited`);
    if (fl.has("approximate")) fail(ctx, at("approximate"), path, "should not specify approximate when unlimited");
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
  const known = algorithmText === undefined || isRateLimitAlgorithm(algorithmText);
  const algorithmName: AlgorithmName = algorithmText !== undefined && known ? (algorithmText as AlgorithmName) : DEFAULT_ALGORITHM;
  if (!known) fail(ctx, at("algorithm"), path, `invalid algorithm '${algorithmText}' (expected ${orList(RATE_LIMIT_ALGORITHMS)})`);
  if (!unlimited && known) {
    for (const k of OWN_KEYS) {
      if (fl.has(k.key) && !algorithm(algorithmName).rule.ownKeys.includes(k))
        fail(ctx, at(k.key), path, `${k.key} can only be used with algorithm ${orList(ownersOf(k.key))}`);
    }
    if (fl.has("approximate") && !algorithm(algorithmName).rule.approximate)
      fail(ctx, at("approximate"), path, `approximate cannot be used with algorithm ${algorithmName}`);
  }
  if (ctx.errors.length > before) return undefined;
  const requestsPerUnit = unlimited ? 0 : (rpu ?? 0);
  return {
    path,
    label,
    source: { file: ctx.file, line },
    unit,
    requestsPerUnit,
    capacity: algorithm(algorithmName).rule.capacity(requestsPerUnit, own),
    algorithm: algorithmName,
    unlimited,
    name,
    replaces,
    ...(approximate && { approximate }),
  };
}

function isRateLimitAlgorithm(name: string): boolean {
  return (RATE_LIMIT_ALGORITHMS as readonly string[]).includes(name);
}

/** Rate-limit algorithms that take this own key. */
function ownersOf(key: string): string[] {
  return ALGORITHMS.filter((a) => a.rule.inRateLimit && a.rule.ownKeys.some((k) => k.key === key)).map((a) => a.name);
}

/** "a", "a or b", "a, b or c". */
function orList(names: readonly string[]): string {
  return names.length < 2 ? names.join("") : `${names.slice(0, -1).join(", ")} or ${names[names.length - 1]}`;
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

export function parseFailureMode(ctx: Ctx, f: Field, path: string): FailureMode | undefined {
  const text = str(ctx, f, "failure_mode", path);
  if (text === undefined) return undefined;
  if ((FAILURE_MODES as readonly string[]).includes(text)) return text as FailureMode;
  fail(ctx, f!.line, path, `invalid failure_mode '${text}' (expected allow, deny, local or error)`);
  return undefined;
}

/** The last part of each limit's store key; two limits of one descriptor must not share one. */
export function keyTags(ctx: Ctx, limits: BaseLimit[], path: string): string[] | undefined {
  const tags: string[] = [];
  const seen = new Map<string, BaseLimit>();
  for (const l of limits) {
    const tag = algorithm(l.algorithm).rule.keyTag(l, limits);
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

/** A descriptor's own keys for limits of an algorithm with a block of its own (quota), from the registry. */
export const BLOCK_KEYS: readonly string[] = ALGORITHMS.flatMap((a) => (a.rule.block ? [a.rule.block.key] : []));

/** rate_limit, rate_limits, then the algorithms' own blocks (quota) of one descriptor, in that order. */
export function parseLimits(ctx: Ctx, fl: Map<string, { node: Node | null; line: number }>, path: string, line: number): BaseLimit[] {
  const out: BaseLimit[] = [];
  const one = fl.get("rate_limit");
  const list = fl.get("rate_limits");
  if (one && list) fail(ctx, list.line, path, "use either rate_limit or rate_limits, not both");
  const single = one ? parseRateLimit(ctx, one, path, line, "rate_limit") : undefined;
  if (single) out.push(single);
  if (list && !isNull(list.node)) out.push(...parseRateLimitList(ctx, list, path));
  for (const a of ALGORITHMS) {
    const block = a.rule.block;
    const f = block && fl.get(block.key);
    if (!block || !f) continue;
    if (!isNull(f.node)) {
      const limit = block.parse(ctx, f, path);
      if (limit) out.push(limit);
    }
    if (single?.unlimited) fail(ctx, f.line, path, `an unlimited descriptor cannot have a ${block.key}`);
  }
  return out;
}
