// One rule load, incremental: the rule files (or xDS resources) as they are now, against those of the rules
// in force; only files that changed, and the other files of the domains they touch, are parsed and validated
// (every error with file, line and path). The result names the domains to replace or remove, each as flat
// record chunks (flat.ts). Pure apart from reading the directory; run in a child process (compile-main.ts)
// so that the event loop never parses.
import { createHash } from "node:crypto";
import { combineFiles, noRuleFilesWarning, parseFile, readRuleDir, type LoadOptions } from "./load.js";
import { domainRecords, type NodeRecord } from "./flat.js";
import type { FailureMode, RuleError } from "./model.js";
import { emptyLevel, type FileRules } from "./tree.js";

/** What the rules in force were compiled from, per file (or resource) name. */
export interface FileState {
  hash: string;
  domain: string;
}

/** One input: its name, a hash of its bytes, and how to get its text (or the error that it has none). */
export interface JobEntry {
  name: string;
  hash: string;
  text(): { name: string; text: string | object } | RuleError;
}

/** A chunk of records as it travels: as is (inline), or serialized bytes (to another thread). */
export type Packed = NodeRecord[] | Uint8Array;

export interface JobInput {
  load: LoadOptions;
  /** The files of the rules in force. */
  prev: [string, FileState][];
  /** The digest of the last input read (loaded or refused): an equal input is no change. */
  lastDigest: string;
  /** A first load split over threads: this job compiles part [i] of [n] contiguous parts of the entries. */
  part?: [number, number];
}

interface CompiledDomain {
  domain: string;
  files: string[];
  ruleCount: number;
  failureMode: FailureMode;
  chunks: Packed[];
}

export interface JobOutput {
  /** The input equals the last one read: nothing to do. */
  unchanged: boolean;
  digest: string;
  errors: RuleError[];
  /** All the errors, where `errors` holds only the first ones (bounded before they travel: compile-process.ts). */
  errorCount?: number;
  warnings: string[];
  /** Every input's state once this load is in force. */
  files: [string, FileState][];
  /** Domains to swap in (new or changed), and those that are gone. */
  domains: CompiledDomain[];
  removed: string[];
  /** Files parsed for this load (the others were unchanged). */
  parsed: number;
}

export function hashOf(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("base64");
}

/** The rule files of a directory as entries; a directory that cannot be read is an error of its own. */
export function dirEntries(dir: string): { entries: JobEntry[]; warnings: string[] } {
  const read = readRuleDir(dir);
  // An unreadable file (or directory) enters the digest, so that it is reported once, not at every check.
  const entries: JobEntry[] = read.errors.map((e) => ({ name: e.file, hash: `error:${e.message}`, text: () => e }));
  for (const f of read.files) entries.push({ name: f.name, hash: hashOf(f.text), text: () => f });
  const warnings = read.files.length === 0 && read.errors.length === 0 ? [noRuleFilesWarning(dir)] : [];
  return { entries, warnings };
}

/**
 * Compiles the entries against input.prev. `pack` turns each chunk into what travels; a file's tree is
 * packed as soon as it is parsed (unless domains are merged), so the thread never holds more than one
 * file's parse beside the packed chunks.
 */
export function runJob(input: JobInput, entries: JobEntry[], warnings: string[] = [], pack: (c: NodeRecord[]) => Packed = (c) => c): JobOutput {
  const digest = hashOf(entries.map((e) => `${e.name}\0${e.hash}`).join("\0"));
  const none: JobOutput = { unchanged: false, digest, errors: [], warnings, files: [], domains: [], removed: [], parsed: 0 };
  if (digest === input.lastDigest) return { ...none, unchanged: true };
  if (input.part) {
    const [i, n] = input.part;
    const size = Math.ceil(entries.length / n);
    entries = entries.slice(i * size, (i + 1) * size);
  }
  const prev = new Map(input.prev);
  const now = new Set(entries.map((e) => e.name));
  const affected = new Set<string>();
  for (const [name, st] of prev) if (!now.has(name)) affected.add(st.domain);
  const errors: RuleError[] = [];
  const parsed = new Map<string, FileRules>();
  const packed = new Map<string, Packed[]>();
  const parse = (e: JobEntry) => {
    const t = e.text();
    if ("message" in t) {
      errors.push(t);
      return;
    }
    const before = errors.length;
    const rules = parseFile(t.name, t.text, errors, input.load.failureMode ?? "allow");
    if (!rules) {
      if (errors.length === before) errors.push({ file: t.name, line: 0, path: "", message: "invalid rule file" });
      return;
    }
    parsed.set(e.name, rules);
    if (!input.load.mergeDomains && errors.length === 0) {
      packed.set(e.name, domainRecords({ ...rules, files: [t.name] }).map(pack));
      rules.root = emptyLevel(); // packed: the tree can go
    }
  };
  for (const e of entries) {
    const was = prev.get(e.name);
    if (was && was.hash === e.hash) continue;
    if (was) affected.add(was.domain);
    parse(e);
    const p = parsed.get(e.name);
    if (p) affected.add(p.domain);
  }
  // The unchanged files of a touched domain take part again: merged with, or duplicates of, the changed ones.
  for (const e of entries) {
    const was = prev.get(e.name);
    if (was && was.hash === e.hash && affected.has(was.domain)) parse(e);
  }
  const ordered = entries.filter((e) => parsed.has(e.name)).map((e) => ({ name: e.name, rules: parsed.get(e.name)! }));
  const domains = combineFiles(ordered, input.load, errors);
  if (errors.length > 0) return { ...none, errors };
  const out: JobOutput = { ...none, parsed: parsed.size };
  for (const e of entries) {
    const p = parsed.get(e.name);
    out.files.push([e.name, { hash: e.hash, domain: p ? p.domain : prev.get(e.name)!.domain }]);
  }
  for (const name of affected) {
    const d = domains.get(name);
    if (!d) out.removed.push(name);
    else {
      // One file per domain unless merged: its chunks were packed when it was parsed.
      const chunks = d.files.length === 1 ? packed.get(entries.find((e) => e.name === d.files[0])?.name ?? "") : undefined;
      out.domains.push({ domain: d.domain, files: d.files, ruleCount: d.ruleCount, failureMode: d.failureMode, chunks: chunks ?? domainRecords(d).map(pack) });
    }
  }
  return out;
}
