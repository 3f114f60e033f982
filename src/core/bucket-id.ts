// An RLQS bucket id (a string map, Envoy's BucketId) as a descriptor: its entries sorted by key, in UTF-16
// code unit order (JavaScript's default sort), so one map always gives one descriptor and one store key
// whatever order Envoy sent it in. The rule files match it as they match any descriptor (docs/rlqs.md).

export interface BucketEntry {
  key: string;
  value: string;
}

/** Bucket ids larger than this are refused (Envoy's builder makes a handful of entries). */
export const MAX_BUCKET_ENTRIES = 16;
/** Longest key or value of a bucket id accepted (a value past 64 characters is hashed in the store key). */
export const MAX_BUCKET_TEXT = 1024;

/** The entries of a bucket id in descriptor order: sorted by key. Keys are unique (a map). */
export function bucketEntries(pairs: Iterable<readonly [string, string]>): BucketEntry[] {
  const out: BucketEntry[] = [];
  for (const [key, value] of pairs) out.push({ key, value });
  out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return out;
}

/** Why a bucket id cannot be served, or undefined (Envoy requires at least one entry, keys and values non-empty). */
export function bucketProblem(entries: readonly BucketEntry[]): string | undefined {
  if (entries.length === 0) return "a bucket id needs at least one entry";
  if (entries.length > MAX_BUCKET_ENTRIES) return `a bucket id has ${entries.length} entries, more than ${MAX_BUCKET_ENTRIES}`;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    if (e.key === "") return "a bucket id has an empty key";
    if (e.value === "") return `bucket id entry ${e.key} has an empty value`;
    if (e.key.length > MAX_BUCKET_TEXT || e.value.length > MAX_BUCKET_TEXT)
      return `bucket id entry ${e.key.slice(0, 64)} is longer than ${MAX_BUCKET_TEXT} characters`;
    if (i > 0 && entries[i - 1].key === e.key) return `bucket id key ${e.key} appears twice`;
  }
  return undefined;
}

/** One text per bucket id (sorted entries, JSON-quoted so no separator can be forged): a map key, a label. */
export function bucketText(entries: readonly BucketEntry[]): string {
  let s = "";
  for (let i = 0; i < entries.length; i++) s += (i > 0 ? "," : "") + JSON.stringify(entries[i].key) + "=" + JSON.stringify(entries[i].value);
  return s;
}
