// What sluice itself says about a run (its /metrics): answers its failure policy gave because the
// store failed or was slower than SLUICE_STORE_TIMEOUT_MS, store errors, and refusals from the deny
// note. A fail-open answer is an OK that Redis never decided, so a run with many of them is not a
// throughput figure of sluice with Redis; the tables show them next to the rates.
import http from "node:http";

/** The counters summed over their labels (and over the workers of a --workers run). */
const FAMILIES = {
  policy: "sluice_rule_failure_policy_decisions_total",
  storeErrors: "sluice_store_errors_total",
  denyNote: "sluice_rule_over_limit_with_local_cache_total",
  decisions: "sluice_decisions_total",
};

function get(port) {
  return new Promise((resolve, reject) => {
    // A fresh connection per scrape: with --workers the primary hands connections to the workers in turn.
    const req = http.get({ host: "127.0.0.1", port, path: "/metrics", agent: false, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`/metrics answered ${res.statusCode}`))));
    });
    req.on("timeout", () => req.destroy(new Error("/metrics timed out")));
    req.on("error", reject);
  });
}

function parse(text) {
  const out = Object.fromEntries(Object.keys(FAMILIES).map((k) => [k, 0]));
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    for (const [k, name] of Object.entries(FAMILIES)) {
      if (line.startsWith(name + "{") || line.startsWith(name + " ")) out[k] += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return out;
}

/**
 * One reading of the counters. Each worker has its own registry; `workers` sequential connections
 * reach each worker once (node:cluster's round robin), so their sum is the service's.
 */
export async function scrapeCounters(adminPort, workers = 1) {
  const total = Object.fromEntries(Object.keys(FAMILIES).map((k) => [k, 0]));
  for (let i = 0; i < workers; i++) {
    const one = parse(await get(adminPort));
    for (const k of Object.keys(total)) total[k] += one[k];
  }
  return total;
}

export function counterDelta(before, after) {
  return Object.fromEntries(Object.keys(FAMILIES).map((k) => [k, after[k] - before[k]]));
}
