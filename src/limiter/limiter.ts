// The decision: rules -> limits -> one atomic store call -> per-descriptor statuses.
// Knows nothing of gRPC or of Redis commands.
import { UNIT_SECONDS, type DomainRules, type Limit, type RuleNode, type RuleSet } from "../rules/model.js";
import { matchLimit } from "../rules/match.js";
import type { Check, CheckResult, Store } from "../store/store.js";
import { algorithmTag, escapePart, escapePattern, storeKey, type KeyEntry } from "./keys.js";
import { overrideLimit } from "./override.js";
import type { Decision, DescriptorDecision, DescriptorRequest, RateLimitRequest } from "./types.js";

export const UNLIMITED_REMAINING = 4294967295;

/** A descriptor resolved to one limit that needs the store. */
interface Pending {
  index: number;
  limit: Limit;
}

export class Limiter {
  private rules: RuleSet;

  constructor(rules: RuleSet, private readonly store: Store) {
    this.rules = rules;
  }

  /** Swap in a new rule set atomically; counters live in the store, so unchanged rules keep theirs. */
  setRules(rules: RuleSet): void {
    this.rules = rules;
  }

  getRules(): RuleSet {
    return this.rules;
  }

  async shouldRateLimit(req: RateLimitRequest): Promise<Decision> {
    const domain = this.rules.domains.get(req.domain);
    const n = req.descriptors.length;
    const requestHits = req.hitsAddend === 0 ? 1 : req.hitsAddend;
    const limits: (Limit | undefined)[] = new Array(n);
    const nodes: (RuleNode[] | undefined)[] = new Array(n);
    let replaced: Set<string> | undefined;

    if (domain) {
      for (let i = 0; i < n; i++) {
        const d = req.descriptors[i];
        if (d.override) {
          limits[i] = overrideLimit(req.domain, d);
          continue;
        }
        const m = matchLimit(domain.root, d.entries);
        if (!m) continue;
        limits[i] = m.limit;
        nodes[i] = m.nodes;
        if (m.limit.replaces.length > 0) {
          replaced ??= new Set();
          for (const name of m.limit.replaces) replaced.add(name);
        }
      }
    }

    const statuses: DescriptorDecision[] = new Array(n);
    const checks: Check[] = [];
    const pending: Pending[] = [];
    let metadata: Decision["metadata"];
    for (let i = 0; i < n; i++) {
      const limit = limits[i];
      if (!limit || (replaced && limit.name !== "" && replaced.has(limit.name))) {
        statuses[i] = { code: "OK", remaining: 0 };
        continue;
      }
      if (limit.metadata) (metadata ??= []).push({ index: i, metadata: limit.metadata });
      if (limit.unlimited) {
        statuses[i] = { code: "OK", remaining: UNLIMITED_REMAINING };
        continue;
      }
      const d = req.descriptors[i];
      const hits = d.hits ?? requestHits;
      if (limit.requestsPerUnit === 0) {
        // Blocks everything; no counter to keep.
        statuses[i] = blocked(limit);
        continue;
      }
      checks.push(toCheck(req.domain, d, nodes[i], limit, hits));
      pending.push({ index: i, limit });
    }

    if (checks.length > 0) {
      const results = await this.store.apply(checks);
      for (let j = 0; j < pending.length; j++) {
        statuses[pending[j].index] = fromResult(pending[j].limit, results[j]);
      }
    }
    return decide(statuses, metadata);
  }
}

function blocked(limit: Limit): DescriptorDecision {
  return limit.shadowMode
    ? { code: "OK", limit, remaining: 0, resetSeconds: UNIT_SECONDS[limit.unit] }
    : { code: "OVER_LIMIT", limit, remaining: 0, resetSeconds: UNIT_SECONDS[limit.unit], retryAfterSeconds: -1 };
}

function toCheck(
  domain: string,
  d: DescriptorRequest,
  matched: RuleNode[] | undefined,
  limit: Limit,
  hits: number,
): Check {
  const windowSeconds = UNIT_SECONDS[limit.unit];
  const entries: KeyEntry[] = new Array(d.entries.length);
  for (let i = 0; i < d.entries.length; i++) {
    const node = matched?.[i];
    const e = d.entries[i];
    entries[i] = {
      key: e.key,
      valuePart: node && node.shareThreshold ? escapePattern(node.value) : escapePart(e.value),
    };
  }
  const isBucket = limit.algorithm === "token_bucket";
  return {
    key: storeKey(domain, entries, algorithmTag(limit.algorithm, windowSeconds)),
    algorithm: limit.algorithm,
    capacity: isBucket ? limit.burst : limit.requestsPerUnit,
    windowSeconds,
    refillPerSecond: limit.requestsPerUnit / windowSeconds,
    hits,
    shadow: limit.shadowMode,
  };
}

function fromResult(limit: Limit, r: CheckResult): DescriptorDecision {
  if (r.allowed) return { code: "OK", limit, remaining: r.remaining, resetSeconds: r.resetSeconds };
  if (limit.shadowMode) return { code: "OK", limit, remaining: 0, resetSeconds: r.resetSeconds };
  return {
    code: "OVER_LIMIT",
    limit,
    remaining: r.remaining,
    resetSeconds: r.resetSeconds,
    retryAfterSeconds: r.retryAfterSeconds,
  };
}

/** The request passes only when every descriptor does; it can pass again once the slowest limit allows it. */
function decide(statuses: DescriptorDecision[], metadata: Decision["metadata"]): Decision {
  let over = false;
  let retry = 0;
  for (const s of statuses) {
    if (s.code !== "OVER_LIMIT") continue;
    over = true;
    const r = s.retryAfterSeconds ?? -1;
    if (retry !== -1) retry = r === -1 ? -1 : Math.max(retry, r);
  }
  const decision: Decision = { code: over ? "OVER_LIMIT" : "OK", statuses };
  if (over && retry > 0) decision.retryAfterSeconds = retry;
  if (metadata) decision.metadata = metadata;
  return decision;
}

export type { DomainRules };
