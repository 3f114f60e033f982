// The store contract for summaries of refusals (src/insight/ writes and reads them): HyperLogLogs of
// distinct members and bounded sorted sets of counts, under keys the caller names, each with a TTL.
// Every key of one call shares a hash tag, so one call goes to one store node.

/** One key of a write: members added to a HyperLogLog (PFADD), or counts added to a sorted set (ZINCRBY) trimmed to `keep`. */
export type SummaryWrite =
  | { kind: "distinct"; key: string; members: string[]; ttlSeconds: number }
  | { kind: "counts"; key: string; members: string[]; counts: number[]; keep: number; ttlSeconds: number };

/** One read: distinct members over the union of these HyperLogLogs (PFCOUNT), or the `n` highest summed counts. */
export type SummaryRead = { kind: "distinct"; keys: string[] } | { kind: "counts"; keys: string[]; n: number };

/** Per read, in order: the estimate, or [member, count] pairs from the highest count down. */
export type SummaryValue = number | [string, number][];

/** Implemented by every store; absent on a store that keeps no summaries. */
export interface SummaryStore {
  /** One store call for the whole batch. */
  writeSummaries(group: number, writes: readonly SummaryWrite[]): Promise<void>;
  readSummaries(group: number, reads: readonly SummaryRead[]): Promise<SummaryValue[]>;
}

/** Orders [member, count] pairs: highest count first, then by member, and keeps `n`. */
export function topCounts(pairs: [string, number][], n: number): [string, number][] {
  pairs.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return pairs.slice(0, n);
}
