// A domain's rule tree as flat records, to cross from the compile process to the event loop in chunks, and
// the compact tree the event loop builds from them: leaves share one empty level (no three Maps a node),
// the strings every descriptor repeats (key, unit, algorithm, file) are one copy, a limit shares its
// node's source. Each chunk is built in one step of bounded cost (compiler.ts yields between chunks).
import { compileGlob } from "./glob.js";
import type { DomainRules, Limit, RuleLevel, RuleNode, Source } from "./model.js";

/**
 * [parent record (-1: the domain's top level), key, value, file index, line, flags, limits or 0, metadata or 0,
 * the limits' path]. Plain arrays: they serialize without a property name per field.
 */
export type NodeRecord = [number, string, string, number, number, number, LimitRecord[] | 0, Record<string, unknown> | 0, string];

/** A Limit but its path and file: [label, line, unit, requests, capacity, algorithm, keyTag, failureMode, flags, name, replaces, period, approximate]. */
type LimitRecord = [
  string,
  number,
  Limit["unit"],
  number,
  number,
  Limit["algorithm"],
  string,
  Limit["failureMode"],
  number,
  string,
  string[] | 0,
  Limit["period"] | 0,
  Limit["approximate"] | 0,
];

const SHARE_THRESHOLD = 1;
const DETAILED_METRIC = 2;
const VALUE_TO_METRIC = 4;
const UNLIMITED = 8;
const SHADOW_MODE = 16;
const QUOTA_MODE = 32;

function limitRecord(l: Limit): LimitRecord {
  const flags =
    (l.unlimited ? UNLIMITED : 0) |
    (l.shadowMode ? SHADOW_MODE : 0) |
    (l.detailedMetric ? DETAILED_METRIC : 0) |
    (l.valueToMetric ? VALUE_TO_METRIC : 0) |
    (l.quotaMode ? QUOTA_MODE : 0);
  return [
    l.label,
    l.source.line,
    l.unit,
    l.requestsPerUnit,
    l.capacity,
    l.algorithm,
    l.keyTag,
    l.failureMode,
    flags,
    l.name,
    l.replaces.length > 0 ? l.replaces : 0,
    l.period ?? 0,
    l.approximate ?? 0,
  ];
}

/** Records per chunk: one chunk is deserialized and built in one event-loop step (about a millisecond or two). */
const CHUNK_RECORDS = 1000;

/** A domain's nodes in pre-order (a parent before its children), split into chunks. */
export function domainRecords(d: DomainRules): NodeRecord[][] {
  const fileIndex = new Map(d.files.map((f, i) => [f, i]));
  const chunks: NodeRecord[][] = [];
  let chunk: NodeRecord[] = [];
  let next = 0;
  const walk = (level: RuleLevel, parent: number) => {
    const visit = (n: RuleNode) => {
      const flags = (n.shareThreshold ? SHARE_THRESHOLD : 0) | (n.detailedMetric ? DETAILED_METRIC : 0) | (n.valueToMetric ? VALUE_TO_METRIC : 0);
      const self = next++;
      const limits = n.limits.length > 0 ? n.limits.map(limitRecord) : 0;
      chunk.push([parent, n.key, n.value, fileIndex.get(n.source.file) ?? 0, n.source.line, flags, limits, n.metadata ?? 0, n.limits[0]?.path ?? ""]);
      if (chunk.length >= CHUNK_RECORDS) {
        chunks.push(chunk);
        chunk = [];
      }
      walk(n.children, self);
    };
    for (const m of level.exact.values()) for (const n of m.values()) visit(n);
    for (const list of level.wildcards.values()) for (const n of list) visit(n);
    for (const n of level.keyOnly.values()) visit(n);
  };
  walk(d.root, -1);
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/** The children of every leaf: never written to (a node gets a level of its own with its first child). */
const EMPTY_LEVEL: RuleLevel = Object.freeze({ exact: new Map(), wildcards: new Map(), keyOnly: new Map() });
const NO_NAMES: string[] = Object.freeze([]) as unknown as string[];

function newLevel(): RuleLevel {
  return { exact: new Map(), wildcards: new Map(), keyOnly: new Map() };
}

/** Builds one domain from its chunks, a chunk per add() call; then done(). */
export class DomainBuilder {
  private readonly root = newLevel();
  private readonly nodes: RuleNode[] = [];
  private readonly strings = new Map<string, string>();

  constructor(
    private readonly files: string[],
    private readonly meta: { domain: string; ruleCount: number; failureMode: DomainRules["failureMode"] },
  ) {
    this.files = files.map((f) => this.intern(f));
  }

  /** One string per distinct text among those that repeat across descriptors. */
  private intern(s: string): string {
    const known = this.strings.get(s);
    if (known !== undefined) return known;
    this.strings.set(s, s);
    return s;
  }

  add(records: NodeRecord[]): void {
    for (const r of records) {
      const [parentIndex, key, value, file, line, flags, limits, metadata, path] = r;
      const source: Source = { file: this.files[file], line };
      const node: RuleNode = {
        key: this.intern(key),
        value,
        wildcard: value.includes("*"),
        shareThreshold: (flags & SHARE_THRESHOLD) !== 0,
        detailedMetric: (flags & DETAILED_METRIC) !== 0,
        valueToMetric: (flags & VALUE_TO_METRIC) !== 0,
        children: EMPTY_LEVEL,
        source,
        limits: limits === 0 ? [] : limits.map((l) => this.limit(l, path, source)),
      };
      if (node.wildcard) node.match = compileGlob(value);
      if (metadata !== 0) node.metadata = metadata;
      this.nodes.push(node);
      let level = this.root;
      if (parentIndex >= 0) {
        const parent = this.nodes[parentIndex];
        if (parent.children === EMPTY_LEVEL) parent.children = newLevel();
        level = parent.children;
      }
      insertBuilt(level, node);
    }
  }

  done(): DomainRules {
    return { domain: this.meta.domain, files: this.files, root: this.root, ruleCount: this.meta.ruleCount, failureMode: this.meta.failureMode };
  }

  /** A limit in one shape for all, its repeated strings shared. */
  private limit(l: LimitRecord, path: string, nodeSource: Source): Limit {
    const [label, line, unit, requestsPerUnit, capacity, algorithm, keyTag, failureMode, flags, name, replaces, period, approximate] = l;
    const out: Limit = {
      path,
      label: this.intern(label),
      source: line === nodeSource.line ? nodeSource : { file: nodeSource.file, line },
      unit: this.intern(unit) as Limit["unit"],
      requestsPerUnit,
      capacity,
      algorithm: this.intern(algorithm) as Limit["algorithm"],
      keyTag: this.intern(keyTag),
      failureMode: this.intern(failureMode) as Limit["failureMode"],
      unlimited: (flags & UNLIMITED) !== 0,
      name: this.intern(name),
      replaces: replaces === 0 ? NO_NAMES : replaces,
      shadowMode: (flags & SHADOW_MODE) !== 0,
      detailedMetric: (flags & DETAILED_METRIC) !== 0,
      valueToMetric: (flags & VALUE_TO_METRIC) !== 0,
      quotaMode: (flags & QUOTA_MODE) !== 0,
    };
    if (period !== 0 && period !== undefined) out.period = period;
    if (approximate !== 0 && approximate !== undefined) out.approximate = approximate;
    return out;
  }
}

/** The records were valid together in the compile process: no duplicate checks here. */
function insertBuilt(level: RuleLevel, node: RuleNode): void {
  if (node.value === "") {
    level.keyOnly.set(node.key, node);
  } else if (node.wildcard) {
    const list = level.wildcards.get(node.key);
    if (list) list.push(node);
    else level.wildcards.set(node.key, [node]);
  } else {
    let values = level.exact.get(node.key);
    if (!values) level.exact.set(node.key, (values = new Map()));
    values.set(node.value, node);
  }
}
