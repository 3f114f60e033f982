// The rule tree: descriptors parsed into levels of nodes (exact, wildcard, key-only), each composite
// key once, and a later file's domain merged into an earlier one's.
import { descriptorPath } from "../core/descriptor-path.js";
import { isMap, isScalar, isSeq, type Node, type Pair, type YAMLMap } from "yaml";
import { compileGlob } from "./glob.js";
import { BLOCK_KEYS, keyTags, parseFailureMode, parseLimits } from "./limits.js";
import type { DomainRules, FailureMode, RuleError, RuleLevel, RuleNode } from "./model.js";
import { levelNodes } from "./model.js";
import { bool, deref, fail, fields, isNull, lineOf, listItem, str, type Ctx, type Field } from "../core/yaml-fields.js";

const DESCRIPTOR_KEYS = new Set([
  "key",
  "value",
  "rate_limit",
  "descriptors",
  "shadow_mode",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
  "metadata",
  "quota_mode",
  // sluice extensions
  "rate_limits",
  "failure_mode",
  // an algorithm's own block (quota), from the registry
  ...BLOCK_KEYS,
]);

/** One file's domain, before files are combined. */
export interface FileRules {
  domain: string;
  domainLine: number;
  root: RuleLevel;
  ruleCount: number;
  failureMode: FailureMode;
}

export function emptyLevel(): RuleLevel {
  return { exact: new Map(), wildcards: new Map(), keyOnly: new Map() };
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
export function parseDescriptors(ctx: Ctx, f: Field, level: RuleLevel, parentPath: string, failureMode: FailureMode): number {
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
    fail(ctx, fl.get("share_threshold")!.line, path, `share_threshold can only be used with wildcard values (containing '*'), but found key '${path}'`);
  }
  const shadowMode = bool(ctx, fl.get("shadow_mode"), "shadow_mode", path) ?? false;
  const detailedMetric = bool(ctx, fl.get("detailed_metric"), "detailed_metric", path) ?? false;
  const valueToMetric = bool(ctx, fl.get("value_to_metric"), "value_to_metric", path) ?? false;
  const quotaMode = bool(ctx, fl.get("quota_mode"), "quota_mode", path) ?? false;
  let metadata: Record<string, unknown> | undefined;
  const md = fl.get("metadata");
  if (md && !isNull(md.node)) {
    // Its aliases are bounded already (core/yaml-aliases.ts): the library's own, stricter count is not applied again.
    if (isMap(md.node)) metadata = md.node.toJS(ctx.doc, { maxAliasCount: -1 }) as Record<string, unknown>;
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

/** Adds a later file's top level into an earlier one's (mergeDomains); duplicates are errors of the later file. */
export function mergeInto(target: DomainRules, from: FileRules, file: string, errors: RuleError[]): void {
  for (const n of levelNodes(from.root)) {
    if (insert(target.root, n)) continue;
    const path = descriptorPath(from.domain, n.key, n.value);
    errors.push({ file, line: n.source.line, path, message: `duplicate descriptor composite key '${path}'` });
  }
  target.ruleCount += from.ruleCount;
  target.files.push(file);
}
