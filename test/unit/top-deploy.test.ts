// The dashboard panel and the example alert use the refused-clients gauge as it is exported.
import fs from "node:fs";
import path from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { ROOT } from "../helpers/sluice.js";

describe("refused clients in Grafana and Prometheus", () => {
  it("the dashboard has the panel, refusals against the gauge (max over instances)", () => {
    const d = JSON.parse(fs.readFileSync(path.join(ROOT, "grafana/sluice.json"), "utf8"));
    const panel = d.panels.find((p: { title: string }) => p.title === "Refusals vs distinct refused clients");
    expect(panel.targets.map((t: { expr: string }) => t.expr)).toEqual([
      'sum by (domain, rule) (increase(sluice_rule_over_limit_total{domain=~"$domain"}[1m]))',
      'max by (domain, rule) (sluice_rule_refused_clients{domain=~"$domain",window="1m"})',
    ]);
    expect(new Set(d.panels.map((p: { id: number }) => p.id)).size).toBe(d.panels.length);
  });

  it("the example alert fires on many distinct refused clients of one rule", () => {
    const file = parse(fs.readFileSync(path.join(ROOT, "deploy/prometheus/sluice-alerts.yml"), "utf8"));
    const [rule] = file.groups[0].rules;
    expect(rule.alert).toBe("SluiceRuleRefusesManyClients");
    expect(rule.expr).toBe('max by (domain, rule) (sluice_rule_refused_clients{window="1m"}) > 100');
    expect(rule.for).toBe("5m");
  });
});
