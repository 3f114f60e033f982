// The reference's debug port (DEBUG_HOST/DEBUG_PORT): GET /rlconfig (the rules in force, in its text
// format), sluice's /metrics, and / listing them as the reference's index does. Its pprof and expvar
// endpoints are Go's and have no counterpart here.
import type { RuleSet } from "../rules/model.js";
import { rlconfigText } from "../inspect/rlconfig-text.js";
import type { AdminHandler } from "./admin.js";

/** GET /rlconfig of one process's rules. */
export function rlconfigRoute(rules: () => RuleSet): AdminHandler {
  return () => ({ status: 200, body: rlconfigText(rules()) });
}

export function debugRoutes(rlconfig: AdminHandler, metrics: AdminHandler): Record<string, AdminHandler> {
  const help: Record<string, string> = {
    "/metrics": "sluice's metrics (Prometheus text format)",
    "/rlconfig": "print out the currently loaded configuration for debugging",
  };
  const index = Object.keys(help)
    .sort()
    .map((p) => `${p}: ${help[p]}\n`)
    .join("");
  return {
    "/": () => ({ status: 200, body: index }),
    "/rlconfig": rlconfig,
    "/metrics": metrics,
  };
}
