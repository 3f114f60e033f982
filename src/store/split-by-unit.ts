// Two stores as one: limits whose unit is a second count in their own store, every other limit in the
// main one (envoyproxy/ratelimit's REDIS_PERSECOND). A group number says which store holds it (even: the
// main store's group n is 2n; odd: the per-second store's group n is 2n + 1), so the limiter still makes
// one call per node and request, refunds across both, and applies each node's failure policy on its own.
import type { Check, CheckResult, Store, StoreStatus, LeaseEntry, LeaseReply } from "./store.js";
import type { SummaryRead, SummaryValue, SummaryWrite } from "./summaries.js";

/** Starts the id of every node of the per-second store, in /readyz, metrics and health. */
const PER_SECOND_NODE_PREFIX = "per_second/";

/** The id the per-second store's node `id` is shown under (status and call metrics agree on it). */
export function perSecondNodeId(id: string): string {
  return PER_SECOND_NODE_PREFIX + id;
}

export class SplitByUnitStore implements Store {
  readonly name: string;

  constructor(
    private readonly main: Store,
    private readonly perSecond: Store,
  ) {
    this.name = `${main.name}, per-second limits: ${perSecond.name}`;
  }

  status(): StoreStatus {
    const main = this.main.status();
    const perSecond = this.perSecond.status();
    return {
      kind: `${main.kind}+per_second:${perSecond.kind}`,
      nodes: [...main.nodes, ...perSecond.nodes.map((n) => ({ ...n, id: perSecondNodeId(n.id) }))],
    };
  }

  groupOf(hashTag: string, unitSeconds?: number): number {
    return unitSeconds === 1 ? 2 * this.perSecond.groupOf(hashTag, 1) + 1 : 2 * this.main.groupOf(hashTag, unitSeconds);
  }

  apply(group: number, checks: Check[], dryRun = false): Promise<CheckResult[]> {
    return this.storeOf(group).apply(Math.floor(group / 2), checks, dryRun);
  }

  refund(group: number, checks: Check[], results: CheckResult[]): Promise<void> {
    return this.storeOf(group).refund(Math.floor(group / 2), checks, results);
  }

  lease(group: number, entries: readonly LeaseEntry[]): Promise<LeaseReply> {
    const store = this.storeOf(group);
    if (!store.lease) return Promise.reject(new Error(`${store.name} does not lease approximate limits`));
    return store.lease(Math.floor(group / 2), entries);
  }

  // Summaries live in the main store (their group comes from groupOf without a unit).
  writeSummaries(group: number, writes: readonly SummaryWrite[]): Promise<void> {
    return this.main.writeSummaries ? this.main.writeSummaries(Math.floor(group / 2), writes) : Promise.resolve();
  }

  readSummaries(group: number, reads: readonly SummaryRead[]): Promise<SummaryValue[]> {
    if (!this.main.readSummaries) return Promise.reject(new Error(`${this.main.name} keeps no summaries`));
    return this.main.readSummaries(Math.floor(group / 2), reads);
  }

  async start(): Promise<void> {
    await Promise.all([this.main.start(), this.perSecond.start()]);
  }

  async close(): Promise<void> {
    // Both are closed even when one fails to; the first failure is reported.
    const [a, b] = await Promise.allSettled([this.main.close(), this.perSecond.close()]);
    if (a.status === "rejected") throw a.reason;
    if (b.status === "rejected") throw b.reason;
  }

  private storeOf(group: number): Store {
    return group % 2 === 1 ? this.perSecond : this.main;
  }
}
