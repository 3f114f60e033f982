// Loads envoyproxy/ratelimit rule files into the compiled model, validating more strictly than the
// reference. Every error carries file, line and descriptor path; all errors of a file are reported.
// This file reads files and directories; yaml-fields.ts, limits.ts and tree.ts parse one file.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { isMap, isScalar, LineCounter, parseDocument } from "yaml";
import type { DomainRules, FailureMode, RuleError, RuleSet } from "./model.js";
import { parseFailureMode } from "./limits.js";
import { emptyLevel, mergeInto, parseDescriptors, type FileRules } from "./tree.js";
import { deref, fail, fields, isNull, lineOf, str, type Ctx } from "./yaml-fields.js";

export { emptyLevel } from "./tree.js";

export interface LoadOptions {
  mergeDomains: boolean;
  /** Where a file names no failure_mode (SLUICE_FAILURE_MODE); "allow" unless given. */
  failureMode?: FailureMode;
}

export interface LoadResult {
  rules?: RuleSet;
  errors: RuleError[];
  warnings: string[];
}

const TOP_KEYS = new Set(["domain", "descriptors", "failure_mode"]);

function parseFile(name: string, source: string, errors: RuleError[], defaultMode: FailureMode): FileRules | undefined {
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
      const failureMode = parseFailureMode(ctx, fl.get("failure_mode"), domain) ?? defaultMode;
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

/** Loads rule files given as text, in the given order (pure; for tests and for loadRuleDir). */
export function loadRuleFiles(files: { name: string; text: string }[], opts: LoadOptions): LoadResult {
  const errors: RuleError[] = [];
  const warnings: string[] = [];
  const domains = new Map<string, DomainRules>();
  for (const f of files) {
    const parsed = parseFile(f.name, f.text, errors, opts.failureMode ?? "allow");
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
