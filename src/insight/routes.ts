// The admin port's views of refusals: GET /top (JSON), /ui (the page), /explain (for the page's form),
// and the sluice_rule_refused_clients gauge, read from the store at scrape time.
import { Gauge, type Registry } from "prom-client";
import type { Logger } from "pino";
import type { AdminHandler, AdminResponse } from "../server/admin/admin.js";
import type { SecretValues } from "../core/secret.js";
import { levelNodes, type Limit, type RuleLevel, type RuleSet } from "../rules/model.js";
import type { Store } from "../store/store.js";
import { explain, parseDescriptorArg } from "../inspect/explain.js";
import { readTop } from "./top-query.js";
import { MAX_RULES_SHOWN, topRoute } from "./top-route.js";
import { withDeadline } from "../store/deadline.js";
import { UI_HEADERS, UI_PAGE } from "./ui-page.js";
import { WINDOWS } from "./windows.js";

interface InsightRoutesOptions {
  store: Store;
  keyPrefix: string;
  rules: () => RuleSet;
  referenceKeys: boolean;
  logger: Logger;
  /** Secret keys' values show hashed in explanations, as in store keys. */
  secrets?: SecretValues;
}

const bad = (message: string): AdminResponse => ({ status: 400, body: `${message}\n` });

export function insightRoutes(o: InsightRoutesOptions): Record<string, AdminHandler> {
  return {
    "/top": topRoute(o),
    "/ui": () => ({ status: 200, body: UI_PAGE, contentType: "text/html; charset=utf-8", headers: UI_HEADERS }),
    "/explain": (q = new URLSearchParams()) => {
      const domain = q.get("domain");
      const raw = q.getAll("descriptor").filter((d) => d !== "");
      if (!domain || raw.length === 0) return bad("explain needs domain and at least one descriptor k=v[,k=v...]");
      try {
        const descriptors = raw.map(parseDescriptorArg);
        return { status: 200, body: explain(o.rules(), domain, descriptors, Date.now(), o.keyPrefix, o.referenceKeys, o.secrets) };
      } catch (err) {
        return bad(`descriptor: ${(err as Error).message}`);
      }
    },
  };
}

/** How long a scrape waits for the store's figures. */
const SCRAPE_READ_MS = 1000;
/** Rules given a zero series at most (per-customer rule sets: only the refusing ones appear). */
const ZERO_SERIES_MAX = 1000;

/**
 * sluice_rule_refused_clients{domain,rule,window}: one series per rule and window, never per client. Rules in
 * force start at 0; while the store cannot be read, the last figures read stay.
 */
export function refusedClientsGauge(
  registry: Registry,
  store: Store,
  keyPrefix: string,
  rules: () => RuleSet,
  rulePath: (l: Limit) => string = (l) => l.path,
): void {
  const last = new Map<string, Map<string, number>>();
  new Gauge({
    name: "sluice_rule_refused_clients",
    help: "Distinct clients refused by a rule over the window (1m, 1h), across every instance sharing the store (HyperLogLog estimate)",
    labelNames: ["domain", "rule", "window"],
    registers: [registry],
    // Every process reads the same store-wide figure: --workers' primary takes one, not the sum.
    aggregator: "max",
    async collect() {
      this.reset();
      const zero = rulePaths(rules(), rulePath);
      for (const window of WINDOWS) {
        let figures = last.get(window.name);
        try {
          // A scrape is not held by a slow store: past the bound, the last figures.
          const read = await withDeadline(readTop(store, keyPrefix, { window, n: 0, maxRules: MAX_RULES_SHOWN }), SCRAPE_READ_MS);
          // A rule with several limits: the largest of their counts.
          figures = new Map();
          for (const r of read) {
            const k = `${r.domain}\0${r.rule}`;
            figures.set(k, Math.max(figures.get(k) ?? 0, r.refused_clients));
          }
          last.set(window.name, figures);
        } catch {
          /* the store cannot be read: the last figures */
        }
        for (const k of new Set([...zero, ...(figures?.keys() ?? [])])) {
          const [domain, rule] = k.split("\0");
          this.set({ domain, rule, window: window.name }, figures?.get(k) ?? 0);
        }
      }
    },
  });
}

/** domain\0rule of every rule carrying a limit, up to ZERO_SERIES_MAX. */
function rulePaths(rules: RuleSet, rulePath: (l: Limit) => string): string[] {
  const out = new Set<string>();
  const walk = (domain: string, level: RuleLevel) => {
    for (const n of levelNodes(level)) {
      if (out.size >= ZERO_SERIES_MAX) return;
      for (const l of n.limits) if (!l.unlimited) out.add(`${domain}\0${rulePath(l)}`);
      walk(domain, n.children);
    }
  };
  for (const [domain, d] of rules.domains) walk(domain, d.root);
  return [...out];
}
