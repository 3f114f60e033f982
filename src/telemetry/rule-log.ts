// A rule source's load problems as log lines, the same at start and on reload: one `invalid rule` line
// per error (file, line, descriptor path and the whole message), one warning line per warning.
import type { Logger } from "pino";
import type { LoadResult } from "../rules/load.js";
import { formatRuleError } from "../rules/model.js";

/** `origin` names the source: { dir } or { xds } (rules/source.ts). */
export function logLoadProblems(logger: Logger, origin: Record<string, string>, result: LoadResult): void {
  for (const w of result.warnings) logger.warn(origin, w);
  for (const e of result.errors) {
    logger.error({ file: e.file, line: e.line, path: e.path, error: formatRuleError(e) }, "invalid rule");
  }
}
