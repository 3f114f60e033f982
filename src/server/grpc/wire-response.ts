// Decision -> the wire shape of envoy.service.ratelimit.v3.RateLimitResponse (proto-loader, keepCase):
// what an answer says, owned here. The reference's POST /json serializes this object; h2/encode-response.ts
// writes the same fields straight to bytes, taking the headers, the refusal body and the Struct from here.
import type { Limit } from "../../rules/model.js";
import type { Decision, DescriptorDecision } from "../../limiter/types.js";
import { CODE_WIRE, UNIT_WIRE } from "./wire-enums.js";

export interface WireStatus {
  code: number;
  current_limit?: { name: string; requests_per_unit: number; unit: number };
  limit_remaining: number;
  duration_until_reset?: { seconds: number; nanos: number };
}

export interface WireResponse {
  overall_code: number;
  statuses: WireStatus[];
  response_headers_to_add?: { key: string; value: string }[];
  raw_body?: Buffer;
  dynamic_metadata?: WireStruct;
}

// The current_limit object never changes for a limit: build it once, not per request.
const currentLimits = new WeakMap<Limit, NonNullable<WireStatus["current_limit"]>>();

function currentLimit(limit: Limit): NonNullable<WireStatus["current_limit"]> {
  let c = currentLimits.get(limit);
  if (!c) {
    c = { name: limit.name, requests_per_unit: limit.requestsPerUnit, unit: UNIT_WIRE[limit.unit] };
    currentLimits.set(limit, c);
  }
  return c;
}

function toWireStatus(s: DescriptorDecision): WireStatus {
  const w: WireStatus = { code: CODE_WIRE[s.code], limit_remaining: s.remaining };
  if (s.limit && !s.limit.unlimited) w.current_limit = currentLimit(s.limit);
  if (s.resetSeconds !== undefined) w.duration_until_reset = { seconds: s.resetSeconds, nanos: 0 };
  return w;
}

export function toWireResponse(d: Decision): WireResponse {
  const statuses: WireStatus[] = new Array(d.statuses.length);
  for (let i = 0; i < d.statuses.length; i++) statuses[i] = toWireStatus(d.statuses[i]);
  const res: WireResponse = { overall_code: CODE_WIRE[d.code], statuses };
  const headers = answerHeaders(d);
  if (headers) res.response_headers_to_add = headers;
  if (d.code === "OVER_LIMIT") res.raw_body = Buffer.from(refusalBody(d));
  const metadata = dynamicMetadata(d);
  if (metadata) res.dynamic_metadata = metadata;
  return res;
}

/** dynamic_metadata: the rules' metadata of the matched descriptors, or the reference's (a builder's object). */
export function dynamicMetadata(d: Decision): WireStruct | undefined {
  if (d.metadata) return metadataStruct(d.metadata);
  if (d.dynamicMetadata) return toStruct(d.dynamicMetadata);
  return undefined;
}

// A rule's metadata never changes while its rules are loaded: converted to a Struct value once.
const metadataValues = new WeakMap<Record<string, unknown>, WireValue>();

/** {"descriptors":[{"index":i,"metadata":{...}}]} as a Struct. */
function metadataStruct(list: NonNullable<Decision["metadata"]>): WireStruct {
  const values: WireValue[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const m = list[i];
    let metadata = metadataValues.get(m.metadata);
    if (!metadata) {
      metadata = toValue(m.metadata);
      metadataValues.set(m.metadata, metadata);
    }
    values[i] = { structValue: { fields: { index: { numberValue: m.index }, metadata } } };
  }
  return { fields: { descriptors: { listValue: { values } } } };
}

// Envoy sends raw_body as the 429 body; a content-type header we add replaces its text/plain.
const JSON_CONTENT_TYPE = { key: "content-type", value: "application/json" };

/**
 * response_headers_to_add: the decision's rate-limit headers; a refused client also gets a JSON
 * content-type and Retry-After first, what it can act on.
 */
export function answerHeaders(d: Decision): { key: string; value: string }[] | undefined {
  if (d.code !== "OVER_LIMIT") return d.headers;
  const headers = [JSON_CONTENT_TYPE];
  if (d.retryAfterSeconds !== undefined) headers.push({ key: "Retry-After", value: String(d.retryAfterSeconds) });
  if (d.headers) for (const h of d.headers) headers.push(h);
  return headers;
}

/** raw_body of a refusal (Envoy's 429 body): a short JSON saying what the headers say. */
export function refusalBody(d: Decision): string {
  let body =
    d.quotaResetsAtMs !== undefined ? '{"error":"quota_exhausted","quota_resets_at":"' + isoSeconds(d.quotaResetsAtMs) + '"' : '{"error":"rate_limited"';
  if (d.retryAfterSeconds !== undefined) body += ',"retry_after_seconds":' + d.retryAfterSeconds;
  return body + "}";
}

/** 2026-11-01T00:00:00Z: ISO 8601 in UTC, whole seconds (periods start on whole seconds). */
function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19) + "Z";
}

// google.protobuf.Struct in protobufjs object form (its built-in struct.proto uses camelCase names).
export interface WireStruct {
  fields: Record<string, WireValue>;
}
export type WireValue =
  | { nullValue: 0 }
  | { numberValue: number }
  | { stringValue: string }
  | { boolValue: boolean }
  | { structValue: WireStruct }
  | { listValue: { values: WireValue[] } };

export function toStruct(obj: Record<string, unknown>): WireStruct {
  const fields: Record<string, WireValue> = {};
  for (const [k, v] of Object.entries(obj)) fields[k] = toValue(v);
  return { fields };
}

function toValue(v: unknown): WireValue {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  if (v instanceof Date) return { stringValue: v.toISOString() };
  if (typeof v === "object") return { structValue: toStruct(v as Record<string, unknown>) };
  return { stringValue: String(v) };
}
