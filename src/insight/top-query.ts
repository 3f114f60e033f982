// Reads the summaries back, merged across every instance by the store: the rules of a window by
// refusals, each with its distinct refused clients and its most refused clients. Two store calls.
// A store in this process does the merging on this event loop (a HyperLogLog union is 7 x 16,384
// registers per rule): there the reads go one at a time, and the loop gets a turn every STEP_MS, so a
// /top of 100 rules never holds the calls waiting behind it; and a rule's distinct clients, read, are
// kept for the second the summaries stay the same (any /top question of that window uses them).
import { setImmediate as nextTurn } from "node:timers/promises";
import type { Store } from "../store/store.js";
import type { SummaryRead, SummaryValue } from "../store/summaries.js";
import { parseRuleId, ruleId, RULES_KEPT, type RuleRef } from "./refusal-summaries.js";
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

/** Event-loop time a read of an in-process store takes before it lets other work run. */
const STEP_MS = 1;
/** How long a rule's distinct count is kept (summaries reach the store once a second), and how many are. */
const DISTINCT_KEEP_MS = 1000;
const DISTINCT_KEPT_MAX = 2000;

/** Distinct counts read from a store in this process, by store and window's key: the count and when it was read. */
const distinctKept = new WeakMap<Store, Map<string, { at: number; count: number }>>();

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
  const values = store.inProcess ? await readInSteps(store, group, reads, nowMs) : await store.readSummaries(group, reads);
  const step = q.n > 0 ? 2 : 1;
  rules.forEach((r, i) => {
    r.refused_clients = values[i * step] as number;
    if (q.n > 0) r.top = (values[i * step + 1] as [string, number][]).map(([client, refused]) => ({ client, refused }));
  });
  return rules;
}

/** A store in this process: one read at a time with a turn of the loop every STEP_MS; distinct counts kept a second. */
async function readInSteps(store: Store, group: number, reads: SummaryRead[], nowMs: number): Promise<SummaryValue[]> {
  let kept = distinctKept.get(store);
  if (!kept) distinctKept.set(store, (kept = new Map()));
  const out: SummaryValue[] = [];
  let since = performance.now();
  for (const r of reads) {
    // The window's keys name its buckets: the same keys, the same figure until the next flush.
    const key = r.kind === "distinct" ? r.keys.join(" ") : undefined;
    const hit = key === undefined ? undefined : kept.get(key);
    if (hit && nowMs - hit.at < DISTINCT_KEEP_MS) {
      out.push(hit.count);
      continue;
    }
    const [value] = await store.readSummaries!(group, [r]);
    out.push(value);
    if (key !== undefined) {
      if (kept.size >= DISTINCT_KEPT_MAX) kept.clear();
      kept.set(key, { at: nowMs, count: value as number });
    }
    if (performance.now() - since >= STEP_MS) {
      await nextTurn();
      since = performance.now();
    }
  }
  return out;
}
