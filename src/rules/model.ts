// The compiled rule model: what the loader produces and the limiter consumes.
import type { RuleError } from "../core/yaml-fields.js";
import type { Limit as AnyLimit, FailureMode, Source } from "../counters/limit.js";
import type { AlgorithmName } from "../counters/registry.js";

// A limit's own shape belongs to counters/ (the algorithms read it); rules/ fills it in.
export type { ApproximateMode, FailureMode, QuotaPeriod, Source, Unit } from "../counters/limit.js";
export { UNIT_SECONDS } from "../counters/limit.js";
export type { RuleError } from "../core/yaml-fields.js";

/** A limit of a rule: its algorithm one the registry holds. */
export type Limit = AnyLimit<AlgorithmName>;

/** One descriptor node of the rule tree. */
export interface RuleNode {
  key: string;
  /** Configured value; "" for a value-less key. May contain `*` wildcards. */
  value: string;
  /** True when value contains `*`. */
  wildcard: boolean;
  /** All values matching this wildcard share one counter (reference share_threshold). */
  shareThreshold: boolean;
  /** Compiled glob matcher (only when wildcard). Built at load time, never per request. */
  match?: (value: string) => boolean;
  /** Reference detailed_metric / value_to_metric, kept per node since they shape stats keys on nodes without limits too. */
  detailedMetric?: boolean;
  valueToMetric?: boolean;
  /** The limits of this descriptor (rate_limit, rate_limits, quota), all checked together; empty when none. */
  limits: Limit[];
  /** Reference `metadata`, returned in dynamic_metadata when matched. */
  metadata?: Record<string, unknown>;
  children: RuleLevel;
  source: Source;
}

/** The children of a node (or a domain's top level), indexed for matching without scans. */
export interface RuleLevel {
  /** key -> value -> node, for exact values. */
  exact: Map<string, Map<string, RuleNode>>;
  /** key -> wildcard nodes in file order. */
  wildcards: Map<string, RuleNode[]>;
  /** key -> the value-less node. */
  keyOnly: Map<string, RuleNode>;
}

/** The nodes of one level in file order (by file, then line). */
export function levelNodes(level: RuleLevel): RuleNode[] {
  const nodes: RuleNode[] = [];
  for (const m of level.exact.values()) for (const n of m.values()) nodes.push(n);
  for (const list of level.wildcards.values()) nodes.push(...list);
  for (const n of level.keyOnly.values()) nodes.push(n);
  return nodes.sort((a, b) => (a.source.file === b.source.file ? a.source.line - b.source.line : a.source.file < b.source.file ? -1 : 1));
}

export interface DomainRules {
  domain: string;
  files: string[];
  root: RuleLevel;
  /** Count of descriptors carrying a limit, for summaries. */
  ruleCount: number;
  /** The domain's failure_mode (default for its descriptors). */
  failureMode: FailureMode;
}

export interface RuleSet {
  domains: Map<string, DomainRules>;
  /** A digest of the files (or resources) the rules were compiled from, when compiled by rules/compiler.ts. */
  digest?: string;
}

/** FILE:LINE: path: message; line 0 (no line: an unreadable directory, an xDS resource) leaves LINE out. */
export function formatRuleError(e: RuleError): string {
  return `${e.file}${e.line > 0 ? `:${e.line}` : ""}: ${e.path || "(top)"}: ${e.message}`;
}

/** The longest error text a log line or /readyz shows: a rule's own text (a 1 MiB value) stays out of both. */
const SHORT_ERROR_CHARS = 500;

/** Text cut to SHORT_ERROR_CHARS, saying how long it was. */
export function shortText(text: string): string {
  return text.length <= SHORT_ERROR_CHARS ? text : `${text.slice(0, SHORT_ERROR_CHARS)}… (${text.length} characters)`;
}

/** formatRuleError, cut to a bounded length (logs, /readyz; `sluice check` prints it whole). */
export function shortRuleError(e: RuleError): string {
  return shortText(formatRuleError(e));
}
