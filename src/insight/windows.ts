// The windows refusals are summarised over, and the store keys of their buckets. A window is read as
// its last BUCKETS_READ buckets (the current one included), so "1m" covers 60 to 70 s. Every key shares
// one hash tag: one instance's batch is one call to one store node.

export interface Window {
  name: "1m" | "1h";
  bucketMs: number;
}

export const WINDOWS: readonly Window[] = [
  { name: "1m", bucketMs: 10_000 },
  { name: "1h", bucketMs: 600_000 },
];

/** Buckets a read spans: the current (partial) one and enough whole ones for the window. */
const BUCKETS_READ = 7;

export function windowByName(name: string): Window | undefined {
  return WINDOWS.find((w) => w.name === name);
}

/** A bucket outlives its last read by one bucket. */
export function ttlSeconds(w: Window): number {
  return Math.ceil(((BUCKETS_READ + 1) * w.bucketMs) / 1000);
}

/** The hash tag of every summary key (under the deployment's key prefix). */
export function summaryTag(keyPrefix: string): string {
  return `${keyPrefix}sluice-top`;
}

type Part = "rules" | "d" | "t";

/**
 * rules: refusals per rule (sorted set); d: the rule's distinct clients (HyperLogLog); t: its top clients.
 * Under PREFIXsluice: like every counter (limiter/keys.ts keyScanPattern finds them too).
 */
export function bucketKey(keyPrefix: string, w: Window, bucket: number, part: Part, ruleId = ""): string {
  return `${keyPrefix}sluice:{${summaryTag(keyPrefix)}}:${w.name}:${bucket}:${part}${ruleId ? `:${ruleId}` : ""}`;
}

/** True for a summary key (tests, tools): its hash tag ends with sluice-top. */
export function isSummaryKey(key: string): boolean {
  return /^[^{]*sluice:\{[^}]*sluice-top\}:/.test(key);
}

/** The keys of one window's read at nowMs, newest first. */
export function windowKeys(keyPrefix: string, w: Window, nowMs: number, part: Part, ruleId = ""): string[] {
  const current = Math.floor(nowMs / w.bucketMs);
  const keys: string[] = [];
  for (let i = 0; i < BUCKETS_READ; i++) keys.push(bucketKey(keyPrefix, w, current - i, part, ruleId));
  return keys;
}
