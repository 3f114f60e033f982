// GET /top: the rules refusing most over a window, each with its distinct and most refused clients.
// - Answers are kept a second (the summaries reach the store once a second) and shared by the requests
//   that ask the same while one is being read: a page polling /top costs one read a second.
// - A store that cannot be read gets 503 in sluice's words (which store, what failed; the store's own text
//   only as `detail`), and one log line per outage, not one per request.
import type { Logger } from "pino";
import type { AdminHandler, AdminResponse } from "../server/admin/admin.js";
import { StoreTimeoutError, withDeadline } from "../store/deadline.js";
import { StoreUnavailableError, type Store } from "../store/store.js";
import { readTop, type TopRule } from "./top-query.js";
import { windowByName, WINDOWS } from "./windows.js";

const DEFAULT_TOP_N = 10;
const MAX_TOP_N = 100;
/** Rules a /top answer shows at most (the most refusing). */
export const MAX_RULES_SHOWN = 100;
/** How long one answer is reused. */
const KEEP_MS = 1000;
/** Different questions kept at most (window x n x domain x rule). */
const KEPT_MAX = 64;
/** A read slower than this is a failed read. */
const READ_MS = 2000;

interface TopRouteOptions {
  store: Store;
  keyPrefix: string;
  logger: Logger;
  now?: () => number;
}

const bad = (message: string): AdminResponse => ({ status: 400, body: `${message}\n` });

/** The store as an operator knows it: its kind and nodes (host:port, never a URL). */
function storeLabel(store: Store): string {
  const ids = store.status().nodes.map((n) => n.id);
  if (ids.length === 0 || (ids.length === 1 && ids[0] === store.name)) return store.name;
  return `${store.name} at ${ids.slice(0, 3).join(", ")}${ids.length > 3 ? ` and ${ids.length - 3} more` : ""}`;
}

export function topRoute(o: TopRouteOptions): AdminHandler {
  const now = o.now ?? Date.now;
  const kept = new Map<string, { at: number; rules: Promise<TopRule[]> }>();
  let down = false;

  const read = (key: string, query: Parameters<typeof readTop>[2]): Promise<TopRule[]> => {
    const t = now();
    const hit = kept.get(key);
    if (hit && t - hit.at < KEEP_MS) return hit.rules;
    if (kept.size >= KEPT_MAX) {
      for (const [k, v] of kept) if (t - v.at >= KEEP_MS) kept.delete(k);
      if (kept.size >= KEPT_MAX) kept.delete(kept.keys().next().value!);
    }
    const rules = withDeadline(readTop(o.store, o.keyPrefix, query, t), READ_MS);
    kept.set(key, { at: t, rules });
    // A failed read is not kept: the next request tries the store again.
    rules.catch(() => kept.get(key)?.rules === rules && kept.delete(key));
    return rules;
  };

  const failed = (err: unknown): AdminResponse => {
    const what =
      err instanceof StoreTimeoutError
        ? `it did not answer within ${READ_MS} ms`
        : err instanceof StoreUnavailableError
          ? "it is unavailable"
          : "it refused the read";
    const store = storeLabel(o.store);
    const error = `/top cannot read the refusal summaries from the store (${store}): ${what}; it answers again once the store does`;
    const detail = err instanceof Error ? err.message : String(err);
    if (!down) {
      down = true;
      o.logger.warn({ store, detail }, `${error} (said once until then)`);
    }
    return { status: 503, body: { error, detail } };
  };

  return async (q = new URLSearchParams()) => {
    const window = windowByName(q.get("window") ?? "1m");
    if (!window) return bad(`window must be one of ${WINDOWS.map((w) => w.name).join(", ")}`);
    const nText = q.get("n") ?? String(DEFAULT_TOP_N);
    const n = /^\d{1,3}$/.test(nText) ? Number(nText) : -1;
    if (n < 0 || n > MAX_TOP_N) return bad(`n must be a whole number from 0 to ${MAX_TOP_N}`);
    const domain = q.get("domain") ?? undefined;
    const rule = q.get("rule") ?? undefined;
    let rules: TopRule[];
    try {
      rules = await read(JSON.stringify([window.name, n, domain, rule]), { window, n, domain, rule, maxRules: MAX_RULES_SHOWN });
    } catch (err) {
      return failed(err);
    }
    if (down) {
      down = false;
      o.logger.info({ store: storeLabel(o.store) }, "/top reads the refusal summaries from the store again");
    }
    return { status: 200, body: { window: window.name, rules } };
  };
}
