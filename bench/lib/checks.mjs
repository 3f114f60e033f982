// A scenario's targets (lib/scenarios.mjs `targets`) judged on one run: Redis script calls per request
// over the full-load window, and calls/s against another scenario of the same run ("n/a" without it).

/**
 * Sets `checks` on every scenario with targets that ran, under the targets' names: redisCallsPerRequest
 * {value, limit, ok}; any other (e.g. vsMemory: {id, ratio}) {against, ratio, limit, ok}; ok is "n/a"
 * where the figure is missing (the other scenario did not run).
 */
export function judgeTargets(scenarios) {
  for (const s of scenarios) {
    if (!s.targets || !s.sluice) continue;
    s.checks = {};
    for (const [name, t] of Object.entries(s.targets)) {
      if (name === "redisCallsPerRequest") {
        const value = s.redisCallsPerRequest ?? null;
        s.checks[name] = { value, limit: t, ok: value == null ? "n/a" : value <= t };
      } else {
        const other = scenarios.find((o) => o.id === t.id && o.sluice);
        const ratio = other ? s.sluice.full.rps / other.sluice.full.rps : null;
        s.checks[name] = { against: t.id, ratio, limit: t.ratio, ok: ratio == null ? "n/a" : ratio >= t.ratio };
      }
    }
  }
}

const verdict = (ok) => (ok === "n/a" ? "n/a" : ok ? "met" : "NOT met");

/** One line per check, for the printed report. */
export function formatChecks(scenarios) {
  const lines = [];
  for (const s of scenarios.filter((x) => x.checks)) {
    for (const c of Object.values(s.checks)) {
      if ("value" in c) lines.push(`${s.id}: Redis calls per request ${c.value == null ? "-" : c.value.toFixed(4)} (<= ${c.limit}): ${verdict(c.ok)}`);
      else
        lines.push(
          `${s.id}: calls/s / ${c.against}'s in this run ${c.ratio == null ? `- (${c.against} did not run)` : c.ratio.toFixed(2)} (>= ${c.limit}): ${verdict(c.ok)}`,
        );
    }
  }
  return lines.length ? "\nTargets (this run):\n" + lines.map((l) => "  " + l).join("\n") : "";
}
