// The admin port's views of refusals: GET /top (JSON), /ui (the page), /explain (for the page's form),
// and the sluice_rule_refused_clients gauge, read from the store at scrape time.
import { Gauge, type Registry } from "prom-client";
import type { AdminHandler, AdminResponse } from "../server/admin.js";
import type { RuleSet } from "../rules/model.js";
import type { Store } from "../store/store.js";
import { explain, parseDescriptorArg } from "../inspect/explain.js";
import { readTop } from "./top-query.js";
import { UI_PAGE } from "./ui-page.js";
import { windowByName, WINDOWS } from "./windows.js";

export const DEFAULT_TOP_N = 10;
const MAX_TOP_N = 100;
/** Rules a /top answer or a scrape shows at most (the most refusing). */
export const MAX_RULES_SHOWN = 100;

export interface InsightRoutesOptions {
  store: Store;
  keyPrefix: string;
  rules: () => RuleSet;
  referenceKeys: boolean;
}

const bad = (message: string): AdminResponse => ({ status: 400, body: `${message}\n` });

export function insightRoutes(o: InsightRoutesOptions): Record<string, AdminHandler> {
  return {
    "/top": async (q = new URLSearchParams()) => {
      const window = windowByName(q.get("window") ?? "1m");
      if (!window) return bad(`window must be one of ${WINDOWS.map((w) => w.name).join(", ")}`);
      const nText = q.get("n") ?? String(DEFAULT_TOP_N);
      const n = /^\d{1,3}$/.test(nText) ? Number(nText) : -1;
      if (n < 0 || n > MAX_TOP_N) return bad(`n must be a whole number from 0 to ${MAX_TOP_N}`);
      const rules = await readTop(o.store, o.keyPrefix, {
        window,
        n,
        domain: q.get("domain") ?? undefined,
        rule: q.get("rule") ?? undefined,
        maxRules: MAX_RULES_SHOWN,
      });
      return { status: 200, body: { window: window.name, rules } };
    },
    "/ui": () => ({ status: 200, body: UI_PAGE, contentType: "text/html; charset=utf-8" }),
    "/explain": (q = new URLSearchParams()) => {
      const domain = q.get("domain");
      const raw = q.getAll("descriptor").filter((d) => d !== "");
      if (!domain || raw.length === 0) return bad("explain needs domain and at least one descriptor k=v[,k=v...]");
      try {
        const descriptors = raw.map(parseDescriptorArg);
        return { status: 200, body: explain(o.rules(), domain, descriptors, Date.now(), o.keyPrefix, o.referenceKeys) };
      } catch (err) {
        return bad(`descriptor: ${(err as Error).message}`);
      }
    },
  };
}

/** sluice_rule_refused_clients{domain,rule,window}: one series per rule and window, never per client. */
export function refusedClientsGauge(registry: Registry, store: Store, keyPrefix: string): void {
  new Gauge({
    name: "sluice_rule_refused_clients",
    help: "Distinct clients refused by a rule over the window (1m, 1h), across every instance sharing the store (HyperLogLog estimate)",
    labelNames: ["domain", "rule", "window"],
    registers: [registry],
    // Every process reads the same store-wide figure: --workers' primary takes one, not the sum.
    aggregator: "max",
    async collect() {
      this.reset();
      for (const window of WINDOWS) {
        const rules = await readTop(store, keyPrefix, { window, n: 0, maxRules: MAX_RULES_SHOWN }).catch(() => []);
        // A rule with several limits: the largest of their counts.
        const seen = new Map<string, number>();
        for (const r of rules) {
          const k = `${r.domain}\0${r.rule}`;
          if ((seen.get(k) ?? -1) >= r.refused_clients) continue;
          seen.set(k, r.refused_clients);
          this.set({ domain: r.domain, rule: r.rule, window: window.name }, r.refused_clients);
        }
      }
    },
  });
}
