// RLQS on the wire (protos/envoy/service/rate_limit_quota/v3/rlqs.proto): usage reports in, bucket
// actions out, read and written by hand as the h2 server does for ShouldRateLimit. Reports are read
// either way Envoy's API has declared bucket_quota_usages: a repeated BucketQuotaUsage (Envoy 1.40) or a
// map<uint64, BucketQuotaUsage> on the same field number. test/unit/rlqs-wire.test.ts holds both to protobufjs.
import { bucketEntries, bucketProblem, type BucketEntry } from "../core/bucket-id.js";

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

export class MalformedReport extends Error {}

export interface BucketUsage {
  /** Sorted by key (core/bucket-id.ts). */
  entries: BucketEntry[];
  allowed: number;
  denied: number;
  /** Envoy's time_elapsed (whole seconds in Envoy 1.40), ms. */
  elapsedMs: number;
}

export interface UsageReports {
  /** "" when absent (only the first report of a stream must carry it). */
  domain: string;
  usages: BucketUsage[];
}

class Reader {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.buf.length) throw new MalformedReport("truncated varint");
      const b = this.buf[this.pos++];
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
    throw new MalformedReport("overlong varint");
  }

  /** The end of a length-delimited field that starts here. */
  len(end: number): number {
    const n = this.varint();
    if (n > end - this.pos) throw new MalformedReport("a field runs past the end of its message");
    return this.pos + n;
  }

  skip(wireType: number, end: number): void {
    if (wireType === VARINT) this.varint();
    else if (wireType === I64) this.pos += 8;
    else if (wireType === I32) this.pos += 4;
    else if (wireType === LEN) this.pos = this.len(end);
    else throw new MalformedReport(`wire type ${wireType} is not accepted`);
    if (this.pos > end) throw new MalformedReport("a field runs past the end of its message");
  }

  text(end: number): string {
    const stop = this.len(end);
    const s = this.buf.toString("utf8", this.pos, stop);
    this.pos = stop;
    return s;
  }
}

/** Decodes one RateLimitQuotaUsageReports; at most maxBuckets usages (more: a MalformedReport naming the bound). */
export function decodeUsageReports(bytes: Buffer, maxBuckets: number): UsageReports {
  const r = new Reader(bytes);
  const end = bytes.length;
  let domain = "";
  const usages: BucketUsage[] = [];
  while (r.pos < end) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    if (field === 1 && wt === LEN) domain = r.text(end);
    else if (field === 2 && wt === LEN) {
      if (usages.length >= maxBuckets) throw new MalformedReport(`a report names more than ${maxBuckets} buckets`);
      usages.push(readUsageOrMapEntry(r, r.len(end)));
    } else r.skip(wt, end);
  }
  return { domain, usages };
}

/** A repeated BucketQuotaUsage, or a map entry {key: uint64, value: BucketQuotaUsage}: field 1's wire type tells. */
function readUsageOrMapEntry(r: Reader, end: number): BucketUsage {
  const start = r.pos;
  let isEntry = false;
  if (r.pos < end) {
    const tag = r.varint();
    isEntry = tag === ((1 << 3) | VARINT); // a map key; a BucketQuotaUsage's field 1 is a message
    r.pos = start;
  }
  if (!isEntry) return readUsage(r, end);
  let usage: BucketUsage | undefined;
  while (r.pos < end) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    if (field === 2 && wt === LEN) usage = readUsage(r, r.len(end));
    else r.skip(wt, end);
  }
  r.pos = end;
  if (!usage) throw new MalformedReport("a bucket_quota_usages entry has no usage");
  return usage;
}

function readUsage(r: Reader, end: number): BucketUsage {
  let entries: BucketEntry[] | undefined;
  let allowed = 0;
  let denied = 0;
  let elapsedMs = 0;
  while (r.pos < end) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    if (field === 1 && wt === LEN) entries = readBucketId(r, r.len(end));
    else if (field === 2 && wt === LEN) elapsedMs = readDurationMs(r, r.len(end));
    else if (field === 3 && wt === VARINT) allowed = r.varint();
    else if (field === 4 && wt === VARINT) denied = r.varint();
    else r.skip(wt, end);
  }
  r.pos = end;
  if (!entries) throw new MalformedReport("a bucket usage has no bucket_id");
  const problem = bucketProblem(entries);
  if (problem) throw new MalformedReport(problem);
  return { entries, allowed, denied, elapsedMs };
}

function readBucketId(r: Reader, end: number): BucketEntry[] {
  const pairs = new Map<string, string>();
  while (r.pos < end) {
    const tag = r.varint();
    const wt = tag & 7;
    if (tag >>> 3 !== 1 || wt !== LEN) {
      r.skip(wt, end);
      continue;
    }
    const stop = r.len(end);
    let key = "";
    let value = "";
    while (r.pos < stop) {
      const t = r.varint();
      if (t === ((1 << 3) | LEN)) key = r.text(stop);
      else if (t === ((2 << 3) | LEN)) value = r.text(stop);
      else r.skip(t & 7, stop);
    }
    // A map's last entry for a key wins, as protobuf reads it.
    pairs.set(key, value);
    if (pairs.size > 64) throw new MalformedReport("a bucket id has more than 64 entries");
  }
  r.pos = end;
  return bucketEntries(pairs);
}

function readDurationMs(r: Reader, end: number): number {
  let seconds = 0;
  let nanos = 0;
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === ((1 << 3) | VARINT)) seconds = r.varint();
    else if (tag === ((2 << 3) | VARINT)) nanos = r.varint();
    else r.skip(tag & 7, end);
  }
  r.pos = end;
  return seconds * 1000 + Math.floor(nanos / 1e6);
}

// ---- answers --------------------------------------------------------------------------------------

/** A token bucket as Envoy builds it: max_tokens, tokens_per_fill per fill interval (whole seconds plus nanos). */
export interface TokenBucketSpec {
  maxTokens: number;
  tokensPerFill: number;
  fillSeconds: number;
  /** Only tells one assignment from the next: Envoy keeps a bucket whose parameters did not change. */
  fillNanos: number;
}

/**
 * ttlSeconds may have a fraction (written as nanos); sluice sends whole seconds, as Envoy 1.40 reads only those.
 * requests_per_time_unit is written for test/integration/rlqs-envoy-1.40.test.ts: Envoy 1.40 refuses it, sluice never sends it.
 */
export type BucketAction =
  | { entries: readonly BucketEntry[]; kind: "blanket"; deny: boolean; ttlSeconds: number }
  | { entries: readonly BucketEntry[]; kind: "token_bucket"; bucket: TokenBucketSpec; ttlSeconds: number }
  | { entries: readonly BucketEntry[]; kind: "requests_per_time_unit"; requests: number; unit: RateLimitUnit; ttlSeconds: number }
  | { entries: readonly BucketEntry[]; kind: "abandon" };

/** envoy.type.v3.RateLimitUnit. */
export const RATE_LIMIT_UNIT = { second: 1, minute: 2, hour: 3, day: 4, month: 5, year: 6 } as const;
export type RateLimitUnit = keyof typeof RATE_LIMIT_UNIT;

class Writer {
  private parts: number[] = [];
  tag(field: number, wt: number): this {
    return this.varint(field * 8 + wt);
  }
  varint(v: number): this {
    let n = Math.floor(v);
    while (n >= 0x80) {
      this.parts.push((n % 128) | 0x80);
      n = Math.floor(n / 128);
    }
    this.parts.push(n);
    return this;
  }
  bytes(field: number, b: Uint8Array | number[]): this {
    this.tag(field, LEN).varint(b.length);
    for (const x of b) this.parts.push(x);
    return this;
  }
  text(field: number, s: string): this {
    return this.bytes(field, Buffer.from(s, "utf8"));
  }
  message(field: number, w: Writer): this {
    return this.bytes(field, w.parts);
  }
  done(): Buffer {
    return Buffer.from(this.parts);
  }
}

function bucketIdMessage(entries: readonly BucketEntry[]): Writer {
  const w = new Writer();
  for (const e of entries) w.message(1, new Writer().text(1, e.key).text(2, e.value));
  return w;
}

function duration(seconds: number, nanos = 0): Writer {
  const whole = Math.floor(seconds);
  const n = nanos + Math.round((seconds - whole) * 1e9);
  const w = new Writer();
  if (whole > 0) w.tag(1, VARINT).varint(whole);
  if (n > 0) w.tag(2, VARINT).varint(n);
  return w;
}

/** One RateLimitQuotaResponse with these actions, in order. */
export function encodeResponse(actions: readonly BucketAction[]): Buffer {
  const out = new Writer();
  for (const a of actions) {
    const action = new Writer().message(1, bucketIdMessage(a.entries));
    if (a.kind === "abandon") {
      action.bytes(3, []);
    } else {
      const strategy = new Writer();
      if (a.kind === "blanket") {
        // A oneof member is written even at its default (ALLOW_ALL = 0).
        strategy.tag(1, VARINT).varint(a.deny ? 1 : 0);
      } else if (a.kind === "requests_per_time_unit") {
        strategy.message(2, new Writer().tag(1, VARINT).varint(a.requests).tag(2, VARINT).varint(RATE_LIMIT_UNIT[a.unit]));
      } else {
        const b = a.bucket;
        const tb = new Writer().tag(1, VARINT).varint(b.maxTokens).message(2, new Writer().tag(1, VARINT).varint(b.tokensPerFill));
        tb.message(3, duration(b.fillSeconds, b.fillNanos));
        strategy.message(3, tb);
      }
      action.message(2, new Writer().message(2, duration(a.ttlSeconds)).message(3, strategy));
    }
    out.message(1, action);
  }
  return out.done();
}
