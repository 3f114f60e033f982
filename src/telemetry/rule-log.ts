// A rule source's load problems as log lines, the same at start and on reload: an `invalid rule` line for each of
// the first LOGGED_ERRORS errors (file, line, descriptor path and the message), then one line with the total; one
// warning line per warning (as many again at most). Bounded: the log is written synchronously, and a file with
// 100,000 errors once wrote 29 MiB of lines while calls waited; `sluice check` lists every error.
import type { Logger } from "pino";
import { errorTotal, type LoadResult } from "../rules/load.js";
import { shortRuleError, shortText } from "../rules/model.js";

/** `invalid rule` lines a load logs at most. */
export const LOGGED_ERRORS = 20;

/** `origin` names the source: { dir } or { xds } (rules/source.ts). */
export function logLoadProblems(logger: Logger, origin: Record<string, string>, result: LoadResult): void {
  // Where an operator reads the rest.
  const everyError = origin.dir ? `\`sluice check ${origin.dir}\` lists every one` : "/readyz shows the first ones the NACK named";
  for (const w of result.warnings.slice(0, LOGGED_ERRORS)) logger.warn(origin, shortText(w));
  const shown = result.errors.slice(0, LOGGED_ERRORS);
  for (const e of shown) logger.error({ file: e.file, line: e.line, path: shortText(e.path), error: shortRuleError(e) }, "invalid rule");
  const total = errorTotal(result);
  if (total > shown.length) {
    logger.error({ ...origin, errors: total, notLogged: total - shown.length, hint: everyError }, "more invalid rules, not logged");
  }
}
