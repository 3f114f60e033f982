// The transport bake-off's judgement and tables: each candidate's figures against the no-op baseline of
// the same run, the speed issue's targets, the conformance results, and which transport to adopt.

import { INCUMBENT } from "../transports/candidates.mjs";

/** How much faster than the incumbent (sluice's transport today) a candidate must be on redis-2tb to replace it. */
export const REPLACE_FACTOR = 1.3;
export const CHOICE_SCENARIO = "redis-2tb";

/**
 * The speed issue's targets, each a figure of one candidate in one scenario: ratios to the no-op grpc-js
 * baseline measured in the same run (calls/s at full load, h2load with one body), p99 at a quarter of the
 * candidate's own maximum against the baseline's p99 at the same rate, CPU per call above the baseline's.
 */
export const TARGETS = [
  { id: "redis", label: "redis-2tb calls/s / baseline", scenario: "redis-2tb", metric: "ratio", min: 0.8 },
  { id: "memory", label: "memory-2tb calls/s / baseline", scenario: "memory-2tb", metric: "ratio", min: 0.9 },
  { id: "h2load", label: "h2load one body / baseline (redis-2tb)", scenario: "redis-2tb", metric: "h2loadRatio", min: 0.8 },
  { id: "moonshot", label: "moonshot: redis-2tb / baseline", scenario: "redis-2tb", metric: "ratio", min: 1.0 },
  { id: "p99-redis", label: "p99 at 1/4 load / baseline's (redis-2tb)", scenario: "redis-2tb", metric: "p99RatioQuarter", max: 1.2 },
  { id: "p99-memory", label: "p99 at 1/4 load / baseline's (memory-2tb)", scenario: "memory-2tb", metric: "p99RatioQuarter", max: 1.2 },
  { id: "cpu-redis", label: "CPU us/call - baseline's (redis-2tb)", scenario: "redis-2tb", metric: "cpuOverBaselineUs", max: 15 },
  { id: "cpu-memory", label: "CPU us/call - baseline's (memory-2tb)", scenario: "memory-2tb", metric: "cpuOverBaselineUs", max: 15 },
];

/** A candidate's figure for a target; undefined where not measured. */
export function targetValue(transports, target, name) {
  const sc = transports.scenarios?.find((s) => s.id === target.scenario && s.candidates);
  const c = sc?.candidates[name];
  return c && !c.failed ? c[target.metric] : undefined;
}

export function targetMet(target, value) {
  if (value == null || Number.isNaN(value)) return undefined;
  return target.min != null ? value >= target.min : value <= target.max;
}

/**
 * The rule of the speed issue: the fastest candidate on redis-2tb among those that pass the conformance
 * suite, if it beats grpc-js by REPLACE_FACTOR there; else grpc-js stays. Provisional when the suite's
 * results are missing (not run, or no suite yet): then no candidate is known to conform.
 */
export function choose(transports) {
  const sc = transports.scenarios?.find((s) => s.id === CHOICE_SCENARIO && s.candidates);
  const conformance = transports.conformance?.results;
  const judged = conformance && !transports.conformance.missing;
  const provisional = !judged;
  const rule = `fastest on ${CHOICE_SCENARIO} among the candidates passing the conformance suite; it replaces ${INCUMBENT} only at >= ${REPLACE_FACTOR}x ${INCUMBENT}'s calls/s`;
  if (!sc) return { name: INCUMBENT, provisional: true, rule, reason: `no ${CHOICE_SCENARIO} figures in this run: ${INCUMBENT} stays` };
  const measured = Object.entries(sc.candidates).filter(([, c]) => !c.failed && c.full);
  const incumbent = sc.candidates[INCUMBENT];
  if (!incumbent?.full)
    return {
      name: INCUMBENT,
      provisional: true,
      rule,
      reason: `${INCUMBENT} not measured on ${CHOICE_SCENARIO} in this run: nothing to compare with, ${INCUMBENT} stays`,
    };
  const passing = measured.filter(([name]) => !judged || conformance[name]?.status === "passed");
  const notes = [];
  if (!judged)
    notes.push(`conformance ${transports.conformance?.missing ? `not run (${transports.conformance.missing})` : "not run in this result"}: provisional`);
  else {
    const failing = measured.filter(([name]) => conformance[name]?.status !== "passed").map(([name]) => `${name} (${conformance[name]?.status ?? "not run"})`);
    if (failing.length) notes.push(`not eligible: ${failing.join(", ")}`);
  }
  if (passing.length === 0)
    return { name: INCUMBENT, provisional, rule, reason: [`no measured candidate passes the conformance suite: ${INCUMBENT} stays`, ...notes].join("; ") };
  const [fastest, f] = passing.reduce((a, b) => (b[1].full.rps > a[1].full.rps ? b : a));
  const factor = f.full.rps / incumbent.full.rps;
  const x = `${fastest} ${factor.toFixed(2)}x ${INCUMBENT} on ${CHOICE_SCENARIO}`;
  if (fastest !== INCUMBENT && factor >= REPLACE_FACTOR)
    return { name: fastest, provisional, rule, factor, reason: [`${x} (>= ${REPLACE_FACTOR}x): adopt ${fastest}`, ...notes].join("; ") };
  const why = fastest === INCUMBENT ? `${INCUMBENT} is the fastest eligible candidate` : `${x} (< ${REPLACE_FACTOR}x)`;
  return { name: INCUMBENT, provisional, rule, factor, fastest, reason: [`${why}: ${INCUMBENT} stays`, ...notes].join("; ") };
}

// ---- tables -------------------------------------------------------------------------------------

function table(header, rows, markdown) {
  if (markdown) {
    const line = (cells) => `| ${cells.join(" | ")} |`;
    return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join("  ");
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

const int = (x) => (x == null || Number.isNaN(x) ? "-" : Math.round(x).toLocaleString("en-US"));
const fix = (x, d = 2) => (x == null || Number.isNaN(x) ? "-" : x.toFixed(d));
const ms = (us) => (us == null ? "-" : (us / 1000).toFixed(us < 10_000 ? 2 : 1));
const p50p99 = (r) => (r?.latencyUs ? `${ms(r.latencyUs.p50)}/${ms(r.latencyUs.p99)}` : "-");
const signed = (x) => (x == null || Number.isNaN(x) ? "-" : `${x >= 0 ? "+" : ""}${x.toFixed(0)}`);

/** Limits answered by sluice's failure policy over the full-load window, as a share of the limits checked. */
function policy(c, checks) {
  const k = c.full?.counters;
  if (!k || !(k.seconds > 0)) return "-";
  const limits = c.full.rps * k.seconds * checks;
  return limits > 0 ? `${((100 * k.policy) / limits).toFixed(k.policy === 0 ? 0 : 2)}%` : "-";
}

function conformanceCell(transports, name) {
  const r = transports.conformance?.results?.[name];
  if (!r) return "not run";
  if (r.status === "passed" || r.status === "failed") return `${r.passed}/${r.passed + r.failed}`;
  return r.status;
}

function scenarioTable(transports, sc, markdown) {
  const base = sc.baseline;
  const rows = [
    [
      "baseline (no-op grpc-js)",
      int(base.full?.rps),
      "1.00",
      (base.fullRoundsRps ?? []).map(int).join(" "),
      fix(base.full?.cpuUsPerCall, 0),
      "",
      p50p99(base.full),
      "",
      "",
      "",
      "",
      int(base.h2load?.rps),
      base.h2load ? "1.00" : "-",
      "",
      "",
    ],
  ];
  for (const [name, c] of Object.entries(sc.candidates)) {
    if (c.failed) {
      rows.push([name, `failed: ${c.failed.split("\n")[0].slice(0, 80)}`, ...Array(13).fill("")]);
      continue;
    }
    const q = c.quarter;
    const h = c.half;
    rows.push([
      name,
      int(c.full.rps),
      fix(c.ratio),
      (c.fullRoundsRps ?? []).map(int).join(" "),
      fix(c.full.cpuUsPerCall, 0),
      signed(c.cpuOverBaselineUs),
      p50p99(c.full),
      q ? `${int(q.rate)}: ${ms(q.candidate.latencyUs.p99)}/${ms(q.baseline.latencyUs.p99)}` : "-",
      fix(c.p99RatioQuarter),
      h ? `${int(h.rate)}: ${ms(h.candidate.latencyUs.p99)}/${ms(h.baseline.latencyUs.p99)}` : "-",
      fix(c.p99RatioHalf),
      int(c.h2load?.rps),
      fix(c.h2loadRatio),
      policy(c, sc.checksPerRequest ?? 1),
      conformanceCell(transports, name),
    ]);
  }
  const title = `${sc.id} (${sc.note}; ${sc.generator} generator${sc.workers > 1 ? `, ${sc.workers} workers` : ""})`;
  return [
    markdown ? `**${title}**\n` : title,
    table(
      [
        "transport",
        "calls/s",
        "ratio",
        "rounds",
        "CPU us/call",
        "vs base",
        "p50/p99 full",
        "1/4 load: rate, p99 it/base",
        "p99 ratio",
        "1/2 load: rate, p99 it/base",
        "p99 ratio",
        "h2load 1 body",
        "ratio",
        "policy",
        "conformance",
      ],
      rows,
      markdown,
    ),
  ].join("\n");
}

export function formatConformance(conformance, markdown = false) {
  if (!conformance) return "conformance: not run (add --conformance, or node bench/transports/conformance.mjs --out FILE)";
  if (conformance.missing) return `conformance: not run: ${conformance.missing}`;
  const entries = Object.entries(conformance.results);
  const rows = entries.map(([name, r]) => [name, r.status, r.passed ?? "-", r.failed ?? "-", r.skipped ?? "-", r.durationS ?? "-", r.via ?? "-"]);
  const out = [
    `Conformance suite (${conformance.suite}), run ${conformance.date}; via: the candidate's module, or the suite's own registration of that transport:`,
  ];
  out.push(table(["transport", "status", "passed", "failed", "skipped", "s", "via"], rows, markdown));
  // What failed, one line each (the first line of vitest's message), at most 10 per candidate.
  for (const [name, r] of entries) {
    if (r.note) out.push(`${markdown ? "- " : ""}${name}: ${r.note}`);
    const failing = (r.tests ?? []).filter((t) => t.state === "failed");
    for (const t of failing.slice(0, 10))
      out.push(`${markdown ? "- " : "  "}${name} failed: ${t.name.replace(/^'[^']*': /, "")}${t.message ? ` (${t.message.slice(0, 160)})` : ""}`);
    if (failing.length > 10) out.push(`${markdown ? "- " : "  "}${name}: and ${failing.length - 10} more`);
  }
  return out.join("\n");
}

export function formatTargets(transports, markdown = false) {
  const names = (transports.candidates ?? []).filter((c) => c.available !== false).map((c) => c.name);
  const chosen = transports.choice?.name;
  const rows = TARGETS.map((t) => [
    t.label,
    t.min != null ? `>= ${t.min}` : `<= ${t.max}`,
    ...names.map((n) => {
      const v = targetValue(transports, t, n);
      const met = targetMet(t, v);
      return v == null ? "-" : `${t.metric === "cpuOverBaselineUs" ? signed(v) : fix(v)} ${met ? "met" : "no"}`;
    }),
  ]);
  return table(["target", "goal", ...names.map((n) => (n === chosen ? `${n} (chosen)` : n))], rows, markdown);
}

/** Everything the bake-off printed: per scenario, conformance, targets, the choice. */
export function formatBakeoff(transports, { markdown = false } = {}) {
  const out = [];
  const cands = transports.candidates ?? [];
  const skipped = cands.filter((c) => c.available === false);
  out.push(
    "",
    `Transport bake-off: ${cands.map((c) => c.name + (c.version ? ` (${c.version})` : "")).join(", ")}` +
      (skipped.length ? `\nskipped: ${skipped.map((c) => `${c.name}: ${c.unavailable}`).join("; ")}` : ""),
    "calls/s: best full-load round (rounds alternate the baseline and every candidate); ratio: to the baseline's best; CPU us/call: the server process;",
    "1/4 and 1/2 rate: open loop at that share of the candidate's maximum, the baseline at the same rate right after (p99 ms, candidate/baseline);",
    "h2load 1 body: full load from h2load with one fixed request body; policy: limits answered by the failure policy at full load",
  );
  for (const sc of transports.scenarios ?? []) {
    out.push("");
    if (sc.failed) out.push(`${sc.id}: failed: ${sc.failed}`);
    else out.push(scenarioTable(transports, sc, markdown));
  }
  out.push("", formatConformance(transports.conformance, markdown));
  if ((transports.scenarios ?? []).some((s) => s.candidates))
    out.push("", "Targets (each candidate's figures in this run):", formatTargets(transports, markdown));
  const c = transports.choice;
  if (c) out.push("", `Choice${c.provisional ? " (provisional)" : ""}: ${c.name}. ${c.reason}.`, `Rule: ${c.rule}.`);
  return out.join("\n");
}
