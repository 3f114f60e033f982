// Refusal summaries end to end in one process: a Limiter on the memory store, decisions observed,
// flushed (one store call per flush), read back as /top reads them; windows expire with the clock.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { Limiter } from "../../src/limiter/limiter.js";
import { loadRuleDir } from "../../src/rules/load.js";
import { MemoryStore } from "../../src/store/memory.js";
import type { SummaryWrite } from "../../src/store/summaries.js";
import { secretHash } from "../../src/insight/client.js";
import { SETTINGS } from "../../src/core/settings-table.js";
import { RefusalSummaries } from "../../src/insight/refusal-summaries.js";
import { readTop } from "../../src/insight/top-query.js";
import { windowByName } from "../../src/insight/windows.js";
import { matchLimit } from "../../src/rules/match.js";
import { ManualClock } from "../helpers/manual-clock.js";

const RULES = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: account
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: token
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: open
    rate_limit: { unit: hour, requests_per_unit: 1000000 }
`;

function setup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-top-"));
  fs.writeFileSync(path.join(dir, "edge.yaml"), RULES);
  const rules = loadRuleDir(dir, { mergeDomains: false, failureMode: "allow" }).rules!;
  const clock = new ManualClock();
  const store = new MemoryStore({ clock });
  const writes: SummaryWrite[][] = [];
  const write = store.writeSummaries.bind(store);
  store.writeSummaries = (group, w) => {
    writes.push([...w]);
    return write(group, w);
  };
  const limiter = new Limiter(rules, store, { clock });
  const now = () => Math.floor(clock.nowMicros() / 1000);
  const summaries = new RefusalSummaries({ store, keyPrefix: "", secretKeys: [...SETTINGS.TOP_SECRET_KEYS.default], hashKey: "k", now });
  const call = async (key: string, value: string) => {
    const req = { domain: "edge", descriptors: [{ entries: [{ key, value }] }], hitsAddend: 0 };
    summaries.observe(req, await limiter.shouldRateLimit(req));
  };
  const top = (window: "1m" | "1h", n = 10) => readTop(store, "", { window: windowByName(window)!, n, maxRules: 100 }, now());
  const limitOf = (key: string) => matchLimit(rules.domains.get("edge")!.root, [{ key, value: "x" }])!.node.limits[0];
  return { clock, store, writes, summaries, call, top, limitOf };
}

describe("refusal summaries", () => {
  it("send nothing for allowed calls", async () => {
    const t = setup();
    for (let i = 0; i < 100; i++) await t.call("open", `o${i}`);
    await t.summaries.flush();
    expect(t.writes).toEqual([]);
    expect(await t.top("1m")).toEqual([]);
  });

  it("count refusals, distinct clients and the most refused, in one store call per flush", async () => {
    const t = setup();
    for (let i = 0; i < 501; i++) await t.call("remote_address", "203.0.113.7");
    for (let round = 0; round < 3; round++) for (let c = 0; c < 2000; c++) await t.call("account", `c${c}`);
    await t.summaries.flush();
    expect(t.writes).toHaveLength(1);
    const rules = await t.top("1m", 3);
    expect(rules.map((r) => [r.rule, r.limit, r.refused])).toEqual([
      ["edge.account", "1/HOUR", 4000],
      ["edge.remote_address", "1/HOUR", 500],
    ]);
    expect(rules[1].refused_clients).toBe(1);
    expect(rules[1].top).toEqual([{ client: "remote_address=203.0.113.7", refused: 500 }]);
    expect(Math.abs(rules[0].refused_clients - 2000)).toBeLessThanOrEqual(40);
  });

  it("hash secret values with the keyed hash", async () => {
    const t = setup();
    for (let i = 0; i < 3; i++) await t.call("token", "hunter2");
    await t.summaries.flush();
    const [rule] = await t.top("1m");
    expect(rule.top).toEqual([{ client: `token=${secretHash("k", "hunter2")}`, refused: 2 }]);
    expect(secretHash("k", "hunter2")).toMatch(/^#[0-9a-f]{12}$/);
  });

  it("count a weighted refusal (an RLQS report's denied requests) as that many, in the same summaries", async () => {
    const t = setup();
    await t.call("account", "c1");
    await t.call("account", "c1"); // refused: 1
    const account = t.limitOf("account");
    t.summaries.refused("edge", account, [{ key: "account", value: "c1" }], 250);
    t.summaries.refused("edge", account, [{ key: "account", value: "c2" }], 40);
    t.summaries.refused("edge", account, [{ key: "account", value: "c3" }], 0); // nothing
    await t.summaries.flush();
    expect(t.writes).toHaveLength(1);
    const [rule] = await t.top("1m");
    expect([rule.rule, rule.limit, rule.refused, rule.refused_clients]).toEqual(["edge.account", "1/HOUR", 291, 2]);
    expect(rule.top).toEqual([
      { client: "account=c1", refused: 251 },
      { client: "account=c2", refused: 40 },
    ]);
  });

  it("forget a minute's refusals after the 1m window, keep them for 1h", async () => {
    const t = setup();
    for (let i = 0; i < 11; i++) await t.call("remote_address", "198.51.100.1");
    await t.summaries.flush();
    t.clock.advance(71_000);
    expect(await t.top("1m")).toEqual([]);
    expect((await t.top("1h")).map((r) => r.refused)).toEqual([10]);
    t.clock.advance(71 * 60_000);
    expect(await t.top("1h")).toEqual([]);
  });
});
