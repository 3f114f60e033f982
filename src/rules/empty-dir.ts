// A rule directory without rule files, or missing altogether, is refused unless the operator allows it:
// at start a mistyped mount path would otherwise mean no limits at all, and on reload a directory emptied
// by mistake would drop every limit. A rule of the directory source only (other sources have no directory).
import { statSync } from "node:fs";
import type { LoadResult } from "./load.js";

export const ALLOW_EMPTY_HINT = "to start with no limits until rule files appear, give --allow-empty-rules (or SLUICE_ALLOW_EMPTY_RULES=true)";

/** The first load of `dir`, refused (as an error naming `dir` as its file) when it is empty or missing and that is not allowed. */
export function refuseEmptyRuleDir(dir: string, result: LoadResult, allowEmpty: boolean, hint = ALLOW_EMPTY_HINT): LoadResult {
  if (result.rules && result.rules.domains.size === 0) {
    if (allowEmpty) return result; // loadRuleDir's warning names the directory
    return refusal(dir, `no rule files (*.yaml, *.yml) in this rule directory: sluice would enforce no limits; ${hint}`);
  }
  if (result.rules || !missing(dir)) return result;
  if (allowEmpty) return { rules: { domains: new Map() }, errors: [], warnings: [`rule directory ${dir} does not exist: no limits until it does`] };
  return refusal(dir, `the rule directory does not exist; ${hint}`);
}

function refusal(dir: string, message: string): LoadResult {
  return { errors: [{ file: dir, line: 0, path: "", message }], warnings: [] };
}

function missing(dir: string): boolean {
  try {
    statSync(dir);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT";
  }
}
