// Reads the summaries back, merged across every instance by the store: the rules of a window by
// refusals, each with its distinct refused clients and its most refused clients. Two store calls.
import type { Store } from "../store/store.js";
import { parseRuleId, ruleId, RULES_KEPT, type RuleRef } from "./refusals.js";
import { summaryTag, windowKeys, type Window } from "./windows.js";

interface TopQuery {
  window: Window;
  domain?: string;
  rule?: string;
  /** Top clients per rule (0: none read). */
  n: number;
  /** Rules shown at most. */
  maxRules: number;
}

export interface TopRule extends RuleRef {
  refused: number;
  refused_clients: number;
  top: { client: string; refused: number }[];
}

export async function readTop(store: Store, keyPrefix: string, q: TopQuery, nowMs = Date.now()): Promise<TopRule[]> {
  if (!store.readSummaries) return [];
  const group = store.groupOf(summaryTag(keyPrefix));
  const [index] = await store.readSummaries(group, [{ kind: "counts", keys: windowKeys(keyPrefix, q.window, nowMs, "rules"), n: RULES_KEPT }]);
  const rules: TopRule[] = [];
  for (const [id, refused] of index as [string, number][]) {
    const ref = parseRuleId(id);
    if (!ref || (q.domain !== undefined && ref.domain !== q.domain) || (q.rule !== undefined && ref.rule !== q.rule)) continue;
    rules.push({ ...ref, refused, refused_clients: 0, top: [] });
    if (rules.length >= q.maxRules) break;
  }
  if (rules.length === 0) return rules;
  const reads = rules.flatMap((r) => {
    const id = ruleId(r);
    const distinct = { kind: "distinct" as const, keys: windowKeys(keyPrefix, q.window, nowMs, "d", id) };
    return q.n > 0 ? [distinct, { kind: "counts" as const, keys: windowKeys(keyPrefix, q.window, nowMs, "t", id), n: q.n }] : [distinct];
  });
  const values = await store.readSummaries(group, reads);
  const step = q.n > 0 ? 2 : 1;
  rules.forEach((r, i) => {
    r.refused_clients = values[i * step] as number;
    if (q.n > 0) r.top = (values[i * step + 1] as [string, number][]).map(([client, refused]) => ({ client, refused }));
  });
  return rules;
}
