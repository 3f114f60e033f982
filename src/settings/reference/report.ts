// At start: what sluice did with the reference's variables that it accepted and does not use, and the
// rule files the reference would load from its runtime directory that sluice does not.
import type { Logger } from "pino";
import type { ReferenceSettings } from "./env.js";
import { filesOnlyTheReferenceLoads } from "./runtime-layout.js";

/** Files named in the warning at most. */
const FILES_SHOWN = 20;

export function reportReferenceEnv(logger: Logger, s: Pick<ReferenceSettings, "referenceNotes" | "runtimeLayout">): void {
  for (const n of s.referenceNotes) {
    // A reference default is worth a line at info; a value of the operator's own choosing, a warning.
    logger[n.differs ? "warn" : "info"]({ variable: n.variable, reason: n.reason }, "envoyproxy/ratelimit setting accepted and not used");
  }
  if (!s.runtimeLayout) return;
  const files = filesOnlyTheReferenceLoads(s.runtimeLayout.dir, s.runtimeLayout.ignoreDotFiles);
  if (files.length === 0) return;
  logger.warn(
    { dir: s.runtimeLayout.dir, files: files.slice(0, FILES_SHOWN), count: files.length },
    "envoyproxy/ratelimit would also load these files as rules; sluice reads only the top-level *.yaml and *.yml files of the directory and never a dot-file: move rule files there (RUNTIME_IGNOREDOTFILES=true makes the reference skip dot-files too)",
  );
}
