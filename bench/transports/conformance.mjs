// The transport conformance suite (test/conformance/) against each candidate of the bake-off: one
// `vitest run test/conformance` per candidate with SLUICE_CONFORMANCE_MODULE=bench/transports/<name>.mjs
// and SLUICE_CONFORMANCE_TRANSPORT=<name> (only that one), every test's result read from vitest's JSON
// report. A name the suite registers itself (grpc-js, from src/) is judged as registered ("via").
//   npm run build && node bench/transports/conformance.mjs [--transports a,b,...] [--out FILE]
// --out merges the results into a bake-off result (bench/results/<date>.json: transports.conformance,
// and the choice made again) and prints its tables; without it only the conformance table is printed.
// `npm run bench -- --transports ... --conformance` runs the same after measuring.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { CANDIDATES, loadCandidate } from "./candidates.mjs";
import { ensureGenerated } from "./generate.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const SUITE = "test/conformance";
const VITEST = path.join(ROOT, "node_modules/vitest/vitest.mjs");
/** One candidate's whole suite; a run that takes longer is stopped and reported as an error. */
const SUITE_TIMEOUT_MS = 15 * 60_000;

/** Why the suite cannot run here; undefined when it can. */
export function suiteMissing() {
  const dir = path.join(ROOT, SUITE);
  if (!fs.existsSync(dir)) return `${SUITE}/ does not exist yet`;
  const files = fs.readdirSync(dir, { recursive: true }).filter((f) => String(f).endsWith(".test.ts"));
  if (files.length === 0) return `${SUITE}/ has no *.test.ts files`;
  if (!fs.existsSync(VITEST)) return "vitest is not installed (npm install)";
  return undefined;
}

/** Runs vitest; resolves { code, output } (output: the last 4 KB of stdout + stderr). */
function vitest(env, reportFile) {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [VITEST, "run", SUITE, "--reporter=json", `--outputFile=${reportFile}`], {
      cwd: ROOT,
      env: { ...process.env, ...env, CI: "true" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    const keep = (chunk) => (output = (output + chunk).slice(-4096));
    proc.stdout.on("data", keep);
    proc.stderr.on("data", keep);
    const timer = setTimeout(() => proc.kill("SIGKILL"), SUITE_TIMEOUT_MS);
    proc.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal, output });
    });
  });
}

/** vitest's JSON report -> [{ file, name, state, durationMs, message? }]. */
function readReport(file) {
  const report = JSON.parse(fs.readFileSync(file, "utf8"));
  const tests = [];
  for (const f of report.testResults ?? []) {
    const rel = path.relative(ROOT, f.name);
    for (const a of f.assertionResults ?? []) {
      const t = { file: rel, name: a.fullName ?? a.title, state: a.status, durationMs: a.duration == null ? null : Math.round(a.duration) };
      if (a.status === "failed" && a.failureMessages?.length) t.message = a.failureMessages[0].split("\n")[0].slice(0, 300);
      tests.push(t);
    }
    // A file that failed to load has no tests: one entry says why.
    if ((f.assertionResults ?? []).length === 0 && f.status === "failed") {
      tests.push({
        file: rel,
        name: "(file)",
        state: "failed",
        durationMs: null,
        message: String(f.message ?? "failed to run")
          .split("\n")[0]
          .slice(0, 300),
      });
    }
  }
  return tests;
}

/**
 * The suite against each named candidate, one after the other. Returns { suite, date, results:
 * { name: { module, status: passed|failed|unavailable|error, passed, failed, skipped, durationS, tests, note? } } }.
 */
export async function runConformance(names, { log = () => undefined } = {}) {
  const missing = suiteMissing();
  const results = {};
  if (missing) {
    for (const n of names) results[n] = { status: "unavailable", note: missing, tests: [] };
    return { suite: SUITE, date: new Date().toISOString(), missing, results };
  }
  await ensureGenerated().catch((err) => log(`code generation failed: ${err.message}`));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-conformance-"));
  try {
    for (const name of names) {
      const c = await loadCandidate(name);
      const module = path.relative(ROOT, c.path);
      if (c.unavailable) {
        results[name] = { module, status: "unavailable", note: c.unavailable, passed: 0, failed: 0, skipped: 0, tests: [] };
        log(`conformance ${name}: unavailable (${c.unavailable})`);
        continue;
      }
      const reportFile = path.join(dir, `${name}.json`);
      const t0 = performance.now();
      // Only this candidate (the suite also runs its registered transports unless narrowed).
      let via = "module";
      let { code, output } = await vitest({ SLUICE_CONFORMANCE_MODULE: c.path, SLUICE_CONFORMANCE_TRANSPORT: name }, reportFile);
      if (fs.existsSync(reportFile) && readReport(reportFile).some((t) => t.message?.includes("registered transport already uses"))) {
        // The suite registers this transport itself (test/conformance/transports.ts, from src/): judge that one.
        via = "registered";
        fs.rmSync(reportFile);
        ({ code, output } = await vitest({ SLUICE_CONFORMANCE_TRANSPORT: name }, reportFile));
      }
      const durationS = Number(((performance.now() - t0) / 1000).toFixed(1));
      if (!fs.existsSync(reportFile)) {
        results[name] = {
          module,
          status: "error",
          note: `vitest exited ${code} without a report: ${output.trim().split("\n").slice(-3).join(" | ")}`,
          passed: 0,
          failed: 0,
          skipped: 0,
          durationS,
          tests: [],
        };
        log(`conformance ${name}: error (${results[name].note})`);
        continue;
      }
      const tests = readReport(reportFile);
      const count = (s) => tests.filter((t) => t.state === s).length;
      const failed = count("failed");
      const passed = count("passed");
      const status = failed === 0 && passed > 0 && code === 0 ? "passed" : passed === 0 && failed === 0 ? "error" : "failed";
      results[name] = { module, via, status, passed, failed, skipped: tests.length - passed - failed, durationS, tests };
      if (status === "error") results[name].note = `no test passed or failed (vitest exit ${code})`;
      log(`conformance ${name}: ${status}, ${passed} passed, ${failed} failed (${durationS} s)`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return { suite: SUITE, date: new Date().toISOString(), results };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { transports: { type: "string" }, out: { type: "string" }, help: { type: "boolean" } } });
  if (values.help) {
    console.log("usage: node bench/transports/conformance.mjs [--transports a,b,...] [--out bench/results/<date>.json]");
    process.exit(0);
  }
  const names = values.transports ? values.transports.split(",").filter(Boolean) : CANDIDATES;
  for (const n of names) {
    if (!CANDIDATES.includes(n)) {
      console.error(`conformance: unknown transport '${n}' (known: ${CANDIDATES.join(", ")})`);
      process.exit(2);
    }
  }
  if (!fs.existsSync(path.join(ROOT, "dist/main.js"))) {
    console.error("conformance: dist/ is missing: run `npm run build`");
    process.exit(2);
  }
  const conformance = await runConformance(names, { log: (line) => console.log(line) });
  const { choose, formatBakeoff, formatConformance } = await import("../lib/bakeoff-report.mjs");
  if (values.out) {
    const result = fs.existsSync(values.out) ? JSON.parse(fs.readFileSync(values.out, "utf8")) : {};
    result.transports ??= { candidates: names.map((name) => ({ name })), scenarios: [] };
    result.transports.conformance = conformance;
    result.transports.choice = choose(result.transports);
    fs.writeFileSync(values.out, JSON.stringify(result, null, 2) + "\n");
    console.log(formatBakeoff(result.transports));
    console.log(`\nwritten: ${path.relative(process.cwd(), values.out)}`);
  } else {
    console.log("\n" + formatConformance(conformance));
  }
  const ran = Object.values(conformance.results);
  process.exit(ran.some((r) => r.status === "failed" || r.status === "error") ? 1 : 0);
}
