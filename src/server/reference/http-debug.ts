// The reference's debug port (DEBUG_HOST/DEBUG_PORT): GET /rlconfig (the rules in force, in its text
// format), /stats (its counters under its stat names, `name: value` lines), and / listing them as the
// reference's index does: what the reference serves there, nothing of sluice's own (those routes name
// clients or rules: the admin port has them). Its pprof endpoints are Go's: /debug/pprof/ says what to use instead.
import type { RuleSet } from "../../rules/model.js";
import { rlconfigText } from "../../inspect/rlconfig-text.js";
import type { AdminHandler } from "../admin/admin.js";

/** GET /rlconfig of one process's rules. */
export function rlconfigRoute(rules: () => RuleSet): AdminHandler {
  return () => ({ status: 200, body: rlconfigText(rules()) });
}

/** GET /stats from counter totals by stat name: one `name: value` line each, sorted, as the reference prints them. */
export function statsRoute(totals: () => Promise<Map<string, number>>): AdminHandler {
  return async () => ({ status: 200, body: statsText(await totals()) });
}

function statsText(totals: Map<string, number>): string {
  return [...totals.keys()]
    .sort()
    .map((name) => `${name}: ${totals.get(name)}\n`)
    .join("");
}

const PPROF =
  "sluice runs on Node.js: Go's pprof profiles do not exist here. Profile with `node --cpu-prof` or `node --heap-prof` " +
  "(or send SIGUSR2 after starting with `node --heapsnapshot-signal=SIGUSR2`); sluice's own metrics are at /metrics on its admin port.\n";

const pprof: AdminHandler = () => ({ status: 501, body: PPROF });

export function debugRoutes(rlconfig: AdminHandler, stats: AdminHandler): Record<string, AdminHandler> {
  const help: Record<string, string> = {
    "/debug/pprof/": "not available: sluice is not a Go program (the answer says what to use)",
    "/rlconfig": "print out the currently loaded configuration for debugging",
    "/stats": "print out stats",
  };
  const index = Object.keys(help)
    .sort()
    .map((p) => `${p}: ${help[p]}\n`)
    .join("");
  return {
    "/": () => ({ status: 200, body: index }),
    "/rlconfig": rlconfig,
    "/stats": stats,
    // 501: a tool that asks for a profile learns at once that there is none, and why (the reference's three paths).
    "/debug/pprof/": pprof,
    "/debug/pprof/profile": pprof,
    "/debug/pprof/trace": pprof,
  };
}
