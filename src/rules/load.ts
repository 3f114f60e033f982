// Loads envoyproxy/ratelimit rule files into the compiled model, validating more strictly than the
// reference. Every error carries file, line and descriptor path; all errors of a file are reported.
// This file reads files and directories; core/yaml-fields.ts, limits.ts and tree.ts parse one file.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Document, isMap, isScalar, LineCounter, parseDocument } from "yaml";
import type { DomainRules, FailureMode, RuleError, RuleSet } from "./model.js";
import { parseFailureMode } from "./limits.js";
import { emptyLevel, mergeInto, parseDescriptors, type FileRules } from "./tree.js";
import { deref, fail, fields, isNull, lineOf, str, type Ctx } from "../core/yaml-fields.js";
import { checkAliases } from "../core/yaml-aliases.js";

export { emptyLevel } from "./tree.js";

export interface LoadOptions {
  mergeDomains: boolean;
  /** Where a file names no failure_mode (SLUICE_FAILURE_MODE); "allow" unless given. */
  failureMode?: FailureMode;
}

export interface LoadResult {
  rules?: RuleSet;
  /** The errors, or the first ones of many (errorCount then says how many there are in all). */
  errors: RuleError[];
  /** All the errors, where `errors` holds only the first ones (a compile process sends at most SENT_ERRORS). */
  errorCount?: number;
  warnings: string[];
  /** What the load cost, when rules/compiler.ts made it. */
  stats?: CompileStats;
}

/** What a load cost; the main-thread part is what calls waited for at most (in steps). */
export interface CompileStats {
  /** From the start of the load to the new rules ready (or refused). */
  durationMs: number;
  /** Event-loop time spent on it: receiving, building the changed domains, swapping. */
  mainThreadMs: number;
  /** The longest single event-loop step of it. */
  longestStepMs: number;
  /** Files (or resources) parsed: the changed ones and the other files of their domains. */
  parsed: number;
}

const TOP_KEYS = new Set(["domain", "descriptors", "failure_mode"]);

/** How many errors a load has in all. */
export function errorTotal(r: LoadResult): number {
  return r.errorCount ?? r.errors.length;
}

/**
 * One rule file parsed and validated on its own; its errors go to `errors`. The source is its text, or the
 * object its YAML reads as (xDS resources: no text to parse, and no lines). `defaultMode`: where it names no failure_mode.
 */
export function parseFile(name: string, source: string | object, errors: RuleError[], defaultMode: FailureMode): FileRules | undefined {
  const lc = new LineCounter();
  const doc =
    typeof source === "string" ? parseDocument(source, { lineCounter: lc, prettyErrors: false }) : new Document(source, { aliasDuplicateObjects: false });
  const ctx: Ctx = { file: name, doc, lc, errors: [] };
  for (const e of doc.errors) {
    fail(ctx, lc.linePos(e.pos[0]).line, "", `error loading config file: ${e.message}`);
  }
  // Aliases are bounded before anything expands them, as the reference's YAML reader bounds them.
  const aliases = ctx.errors.length === 0 ? checkAliases(doc) : undefined;
  if (aliases?.problem) fail(ctx, lineOf(ctx, aliases.problem.at), "", `error loading config file: yaml: ${aliases.problem.message}`);
  else if (aliases) ctx.aliases = aliases.targets;
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
      const failureMode = parseFailureMode(ctx, fl.get("failure_mode"), domain) ?? defaultMode;
      const root = emptyLevel();
      const ruleCount = parseDescriptors(ctx, fl.get("descriptors"), root, domain, failureMode);
      if (ctx.errors.length === 0) return { domain, domainLine, root, ruleCount, failureMode };
    }
  }
  // Stable sort keeps the order of errors found on one line.
  ctx.errors.sort((a, b) => a.line - b.line);
  // One by one: a spread of 100,000 errors would overflow the stack.
  for (const e of ctx.errors) errors.push(e);
  return undefined;
}

/** Loads rule files given as text, in the given order (pure; for tests and for loadRuleDir). */
export function loadRuleFiles(files: { name: string; text: string }[], opts: LoadOptions): LoadResult {
  const errors: RuleError[] = [];
  const parsed: { name: string; rules: FileRules }[] = [];
  for (const f of files) {
    const rules = parseFile(f.name, f.text, errors, opts.failureMode ?? "allow");
    if (rules) parsed.push({ name: f.name, rules });
  }
  const domains = combineFiles(parsed, opts, errors);
  if (errors.length > 0) return { errors, warnings: [] };
  return { rules: { domains }, errors, warnings: [] };
}

/** Parsed files, in order, into domains: a domain in two files is merged (mergeDomains) or an error of the later file. */
export function combineFiles(parsed: { name: string; rules: FileRules }[], opts: LoadOptions, errors: RuleError[]): Map<string, DomainRules> {
  const domains = new Map<string, DomainRules>();
  for (const { name, rules: p } of parsed) {
    const existing = domains.get(p.domain);
    if (!existing) {
      domains.set(p.domain, { domain: p.domain, files: [name], root: p.root, ruleCount: p.ruleCount, failureMode: p.failureMode });
    } else if (opts.mergeDomains) {
      mergeInto(existing, p, name, errors);
    } else {
      errors.push({
        file: name,
        line: p.domainLine,
        path: p.domain,
        message: `duplicate domain '${p.domain}' in config file (also in ${existing.files.join(", ")})`,
      });
    }
  }
  return domains;
}

/** The rule files of dir as loadRuleDir selects them, or the directory's own error. */
export function readRuleDir(dir: string): { files: { name: string; text: string }[]; errors: RuleError[]; dirError?: boolean } {
  let names: string[];
  try {
    if (!statSync(dir).isDirectory())
      return { files: [], errors: [{ file: dir, line: 0, path: "", message: "rule directory is not a directory" }], dirError: true };
    names = readdirSync(dir);
  } catch (e) {
    return { files: [], errors: [{ file: dir, line: 0, path: "", message: `cannot read rule directory: ${(e as Error).message}` }], dirError: true };
  }
  const files: { name: string; text: string }[] = [];
  const errors: RuleError[] = [];
  for (const name of names.sort()) {
    if (name.startsWith(".") || !/\.ya?ml$/.test(name)) continue;
    const file = join(dir, name);
    try {
      // statSync follows symlinks, so a link to a rule file counts as a rule file.
      if (!statSync(file).isFile()) continue;
      files.push({ name: file, text: readFileSync(file, "utf8") });
    } catch (e) {
      errors.push({ file, line: 0, path: "", message: `cannot read rule file: ${(e as Error).message}` });
    }
  }
  return { files, errors };
}

/** The warning of a directory without rule files. */
export function noRuleFilesWarning(dir: string): string {
  return `no rule files (*.yaml, *.yml) in ${dir}`;
}

/** Loads the top-level *.yaml / *.yml files of dir (symlinks followed; dot-files and sub-directories skipped), by name. */
export function loadRuleDir(dir: string, opts: LoadOptions): LoadResult {
  const read = readRuleDir(dir);
  if (read.dirError) return { errors: read.errors, warnings: [] };
  const result = loadRuleFiles(read.files, opts);
  if (read.errors.length > 0) {
    result.errors = read.errors.concat(result.errors);
    delete result.rules;
  }
  if (read.files.length === 0 && read.errors.length === 0) result.warnings.push(noRuleFilesWarning(dir));
  return result;
}
