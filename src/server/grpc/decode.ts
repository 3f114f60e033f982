// A request's bounds and checks, with their words: the one owner of what makes a RateLimitRequest
// invalid. decodeRequest applies them to proto-loader's object form (the reference's POST /json);
// h2/decode-request.ts applies them while it reads the gRPC bytes. No decisions here.
import type { Unit } from "../../rules/model.js";
import { InvalidRequestError, type DescriptorRequest, type RateLimitRequest } from "../../limiter/types.js";

export interface RequestBounds {
  maxDescriptors: number;
  maxEntries: number;
  maxKeyLength: number;
  maxValueLength: number;
}

// envoy.type.v3.RateLimitUnit numbers (the request-side enum has no WEEK).
const OVERRIDE_UNITS: (Unit | undefined)[] = [undefined, "second", "minute", "hour", "day", "month", "year"];

/** The unit of a descriptor's limit override; undefined when the number is none of SECOND..YEAR. */
export const overrideUnit = (unitNumber: number): Unit | undefined => OVERRIDE_UNITS[unitNumber];

/** Each check gives the fault's message, or undefined when it passes. */
export const requestFault = {
  domain(domain: string, b: RequestBounds): string | undefined {
    if (domain === "") return "domain must not be empty";
    if (domain.length > b.maxKeyLength) return `domain is longer than ${b.maxKeyLength} characters`;
    return undefined;
  },
  descriptorCount(n: number, b: RequestBounds): string | undefined {
    if (n === 0) return "request has no descriptors";
    if (n > b.maxDescriptors) return `request has ${n} descriptors, more than the maximum ${b.maxDescriptors}`;
    return undefined;
  },
  entryCount(i: number, n: number, b: RequestBounds): string | undefined {
    return n > b.maxEntries ? `descriptor ${i} has ${n} entries, more than the maximum ${b.maxEntries}` : undefined;
  },
  entry(i: number, j: number, key: string, value: string, b: RequestBounds): string | undefined {
    if (key === "") return `descriptor ${i} entry ${j}: key must not be empty`;
    if (key.length > b.maxKeyLength) return `descriptor ${i} entry ${j}: key is longer than ${b.maxKeyLength} characters`;
    if (value.length > b.maxValueLength) return `descriptor ${i} entry ${j}: value is longer than ${b.maxValueLength} characters`;
    return undefined;
  },
  overrideUnit: (i: number, unitNumber: number) =>
    `descriptor ${i}: limit override unit ${unitNumber === 0 ? "UNKNOWN" : unitNumber} is not valid (SECOND..YEAR)`,
};

function check(fault: string | undefined): void {
  if (fault !== undefined) throw new InvalidRequestError(fault);
}

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
  check(requestFault.domain(domain, b));
  const wd = w.descriptors ?? [];
  check(requestFault.descriptorCount(wd.length, b));
  const descriptors: DescriptorRequest[] = new Array(wd.length);
  for (let i = 0; i < wd.length; i++) descriptors[i] = decodeDescriptor(wd[i], i, b);
  return { domain, descriptors, hitsAddend: w.hits_addend ?? 0 };
}

function decodeDescriptor(w: WireDescriptor, i: number, b: RequestBounds): DescriptorRequest {
  const we = w.entries ?? [];
  check(requestFault.entryCount(i, we.length, b));
  const entries = new Array(we.length);
  for (let j = 0; j < we.length; j++) {
    const key = we[j].key ?? "";
    const value = we[j].value ?? "";
    check(requestFault.entry(i, j, key, value, b));
    entries[j] = { key, value };
  }
  const d: DescriptorRequest = { entries };
  if (w.limit) {
    const unitNumber = w.limit.unit ?? 0;
    const unit = overrideUnit(unitNumber);
    if (!unit) throw new InvalidRequestError(requestFault.overrideUnit(i, unitNumber));
    d.override = { requestsPerUnit: w.limit.requests_per_unit ?? 0, unit };
  }
  if (w.hits_addend) d.hits = w.hits_addend.value ?? 0;
  return d;
}
