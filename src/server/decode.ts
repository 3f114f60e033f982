// Wire request -> limiter request, with every bound checked. No decisions here.
import type { Unit } from "../rules/model.js";
import { InvalidRequestError, type DescriptorRequest, type RateLimitRequest } from "../limiter/types.js";

export interface RequestBounds {
  maxDescriptors: number;
  maxEntries: number;
  maxKeyLength: number;
  maxValueLength: number;
}

// envoy.type.v3.RateLimitUnit numbers (the request-side enum has no WEEK).
const OVERRIDE_UNITS: (Unit | undefined)[] = [undefined, "second", "minute", "hour", "day", "month", "year"];

interface WireEntry {
  key?: string;
  value?: string;
}
interface WireDescriptor {
  entries?: WireEntry[];
  limit?: { requests_per_unit?: number; unit?: number } | null;
  hits_addend?: { value?: number } | null;
}
export interface WireRequest {
  domain?: string;
  descriptors?: WireDescriptor[];
  hits_addend?: number;
}

export function decodeRequest(w: WireRequest, b: RequestBounds): RateLimitRequest {
  const domain = w.domain ?? "";
  if (domain === "") throw new InvalidRequestError("domain must not be empty");
  if (domain.length > b.maxKeyLength) {
    throw new InvalidRequestError(`domain is longer than ${b.maxKeyLength} characters`);
  }
  const wd = w.descriptors ?? [];
  if (wd.length === 0) throw new InvalidRequestError("request has no descriptors");
  if (wd.length > b.maxDescriptors) {
    throw new InvalidRequestError(`request has ${wd.length} descriptors, more than the maximum ${b.maxDescriptors}`);
  }
  const descriptors: DescriptorRequest[] = new Array(wd.length);
  for (let i = 0; i < wd.length; i++) descriptors[i] = decodeDescriptor(wd[i], i, b);
  return { domain, descriptors, hitsAddend: w.hits_addend ?? 0 };
}

function decodeDescriptor(w: WireDescriptor, i: number, b: RequestBounds): DescriptorRequest {
  const we = w.entries ?? [];
  if (we.length > b.maxEntries) {
    throw new InvalidRequestError(`descriptor ${i} has ${we.length} entries, more than the maximum ${b.maxEntries}`);
  }
  const entries = new Array(we.length);
  for (let j = 0; j < we.length; j++) {
    const key = we[j].key ?? "";
    const value = we[j].value ?? "";
    if (key === "") throw new InvalidRequestError(`descriptor ${i} entry ${j}: key must not be empty`);
    if (key.length > b.maxKeyLength) {
      throw new InvalidRequestError(`descriptor ${i} entry ${j}: key is longer than ${b.maxKeyLength} characters`);
    }
    if (value.length > b.maxValueLength) {
      throw new InvalidRequestError(`descriptor ${i} entry ${j}: value is longer than ${b.maxValueLength} characters`);
    }
    entries[j] = { key, value };
  }
  const d: DescriptorRequest = { entries };
  if (w.limit) {
    const unitNumber = w.limit.unit ?? 0;
    const unit = OVERRIDE_UNITS[unitNumber];
    if (!unit) {
      throw new InvalidRequestError(`descriptor ${i}: limit override unit ${unitNumber === 0 ? "UNKNOWN" : unitNumber} is not valid (SECOND..YEAR)`);
    }
    d.override = { requestsPerUnit: w.limit.requests_per_unit ?? 0, unit };
  }
  if (w.hits_addend) d.hits = w.hits_addend.value ?? 0;
  return d;
}
