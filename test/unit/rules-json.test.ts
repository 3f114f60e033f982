// GET /rules as JSON, from loaded rules: each limit's settings, extensions only where used.
import { describe, expect, it } from "vitest";
import { rulesJson } from "../../src/inspect/rules-json.js";
import { loadRuleFiles } from "../../src/rules/load.js";

describe("GET /rules JSON", () => {
  it("shows approximate with its sync interval only on approximate limits", () => {
    const yaml = [
      "domain: hot", //                                                                                     1
      "descriptors:",
      "  - key: ip", //                                                                                     3
      "    rate_limits:",
      "      - {unit: second, requests_per_unit: 1000, approximate: {}}", //                                 5
      "      - {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 10, approximate: {sync_interval_ms: 250}}",
      "      - {unit: hour, requests_per_unit: 5000}", //                                                    7
    ].join("\n");
    const { rules, errors } = loadRuleFiles([{ name: "hot.yaml", text: yaml }], { mergeDomains: false });
    expect(errors).toEqual([]);
    expect(rulesJson(rules!).domains.hot.descriptors[0].limits).toEqual([
      {
        label: "rate_limits[0]",
        unlimited: false,
        unit: "second",
        requests_per_unit: 1000,
        algorithm: "fixed_window",
        approximate: { sync_interval_ms: 100 },
        failure_mode: "allow",
        shadow_mode: false,
        source: { file: "hot.yaml", line: 5 },
      },
      {
        label: "rate_limits[1]",
        unlimited: false,
        unit: "minute",
        requests_per_unit: 60,
        algorithm: "token_bucket",
        burst: 10,
        approximate: { sync_interval_ms: 250 },
        failure_mode: "allow",
        shadow_mode: false,
        source: { file: "hot.yaml", line: 6 },
      },
      {
        label: "rate_limits[2]",
        unlimited: false,
        unit: "hour",
        requests_per_unit: 5000,
        algorithm: "fixed_window",
        failure_mode: "allow",
        shadow_mode: false,
        source: { file: "hot.yaml", line: 7 },
      },
    ]);
    // The wire text: the key sits after the algorithm's own settings.
    expect(JSON.stringify(rulesJson(rules!).domains.hot.descriptors[0].limits[1])).toBe(
      '{"label":"rate_limits[1]","unlimited":false,"failure_mode":"allow","shadow_mode":false,"source":{"file":"hot.yaml","line":6},' +
        '"unit":"minute","requests_per_unit":60,"algorithm":"token_bucket","burst":10,"approximate":{"sync_interval_ms":250}}',
    );
  });
});
