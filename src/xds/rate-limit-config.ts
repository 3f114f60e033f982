// RateLimitConfig resources (envoyproxy/ratelimit's rls_conf.proto) -> rule file texts, so that rules from a
// control plane go through the one validator (rules/load.ts) and read exactly as the same rules in a file.
// The mapping is the reference's ConfigXdsProtoToYaml: unit by name, metadata as a map; fields at their proto
// default are left out where the YAML form tells "absent" apart (a count of 0 beside `unlimited`, UNKNOWN unit).
import path from "node:path";
import protobuf from "protobufjs";
import type { Type } from "protobufjs";
import { stringify } from "yaml";
import { PROTO_DIR } from "../core/proto-dir.js";

export const RATE_LIMIT_CONFIG_TYPE = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/** Nesting a control plane may send; deeper is refused before it reaches the YAML parser. */
export const MAX_DESCRIPTOR_DEPTH = 64;

const UNIT_NAMES: Record<number, string> = { 1: "second", 2: "minute", 3: "hour", 4: "day", 5: "month", 6: "year", 7: "week" };

interface Policy {
  unit?: number;
  requests_per_unit?: number;
  unlimited?: boolean;
  name?: string;
  replaces?: { name?: string }[];
}
interface Descriptor {
  key?: string;
  value?: string;
  rate_limit?: Policy;
  descriptors?: Descriptor[];
  shadow_mode?: boolean;
  detailed_metric?: boolean;
  quota_mode?: boolean;
  metadata?: StructMsg;
}
interface StructMsg {
  fields?: Record<string, ValueMsg>;
}
/** google.protobuf.Value as protobufjs's bundled definition names it (camelCase, whatever keepCase says). */
interface ValueMsg {
  nullValue?: number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: StructMsg;
  listValue?: { values?: ValueMsg[] };
}

/** One resource as a rule file: its name plays the file's role in every error. */
interface ConfigFile {
  name: string;
  text: string;
}

/** A resource that cannot become a rule file (not this type, undecodable, too deep). */
export class ResourceError extends Error {
  constructor(
    readonly resource: string,
    readonly problem: string,
  ) {
    super(`${resource}: ${problem}`);
  }
}

let configType: Type | undefined;

function rateLimitConfigType(): Type {
  if (!configType) {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => (target.startsWith("google/protobuf/") ? target : path.join(PROTO_DIR, target));
    root.loadSync("ratelimit/config/ratelimit/v3/rls_conf.proto", { keepCase: true });
    root.resolveAll();
    configType = root.lookupType("ratelimit.config.ratelimit.v3.RateLimitConfig");
  }
  return configType;
}

/** Decodes one Any of the response (index = its place, named in errors when the resource has no name). */
export function configFile(any: { type_url?: string; value?: Uint8Array }, index: number): ConfigFile {
  const { name, doc } = configObject(any, index);
  return { name, text: stringify(doc, { aliasDuplicateObjects: false, lineWidth: 0 }) };
}

/** One resource as the object a rule file's YAML reads as (what configFile writes out). */
export function configObject(any: { type_url?: string; value?: Uint8Array }, index: number): { name: string; doc: Record<string, unknown> } {
  const fallback = `resource[${index}]`;
  if (any.type_url !== RATE_LIMIT_CONFIG_TYPE) {
    throw new ResourceError(fallback, `type ${any.type_url || "(none)"} is not ${RATE_LIMIT_CONFIG_TYPE}`);
  }
  let msg: { name?: string; domain?: string; descriptors?: Descriptor[] };
  try {
    msg = rateLimitConfigType().toObject(rateLimitConfigType().decode(any.value ?? new Uint8Array()), {
      defaults: false,
      enums: Number,
      arrays: false,
    }) as typeof msg;
  } catch (err) {
    throw new ResourceError(fallback, `not a RateLimitConfig: ${(err as Error).message}`);
  }
  const name = msg.name || fallback;
  const doc: Record<string, unknown> = { domain: msg.domain ?? "" };
  if (msg.descriptors?.length) doc.descriptors = msg.descriptors.map((d) => descriptor(d, name, 1));
  return { name, doc };
}

/**
 * The resource's name without decoding it, when it is the message's first field (as encoders write it):
 * an unchanged resource is known by name and bytes alone. undefined: decode to know.
 */
export function leadingName(value: Uint8Array | undefined): string | undefined {
  if (!value || value.length < 2 || value[0] !== 0x0a) return undefined;
  let len = 0;
  let shift = 0;
  let i = 1;
  for (; i < value.length && i < 6; i++) {
    len |= (value[i] & 0x7f) << shift;
    shift += 7;
    if ((value[i] & 0x80) === 0) break;
  }
  const start = i + 1;
  if (start + len > value.length) return undefined;
  return Buffer.from(value.buffer, value.byteOffset + start, len).toString("utf8");
}

function descriptor(d: Descriptor, resource: string, depth: number): Record<string, unknown> {
  if (depth > MAX_DESCRIPTOR_DEPTH) throw new ResourceError(resource, `descriptors nested deeper than ${MAX_DESCRIPTOR_DEPTH} levels`);
  const out: Record<string, unknown> = { key: d.key ?? "" };
  if (d.value) out.value = d.value;
  if (d.rate_limit) out.rate_limit = policy(d.rate_limit);
  if (d.shadow_mode) out.shadow_mode = true;
  if (d.detailed_metric) out.detailed_metric = true;
  if (d.quota_mode) out.quota_mode = true;
  if (d.metadata) out.metadata = struct(d.metadata);
  if (d.descriptors?.length) out.descriptors = d.descriptors.map((c) => descriptor(c, resource, depth + 1));
  return out;
}

function policy(p: Policy): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const unit = p.unit ? UNIT_NAMES[p.unit] : undefined;
  if (p.unlimited) {
    out.unlimited = true;
    // Only what contradicts `unlimited` is carried, so the validator names it.
    if (unit) out.unit = unit;
    if (p.requests_per_unit) out.requests_per_unit = p.requests_per_unit;
  } else {
    // UNKNOWN (0) or a number outside the enum: left for the validator to name.
    out.unit = unit ?? (p.unit ? `unit number ${p.unit}` : null);
    out.requests_per_unit = p.requests_per_unit ?? 0;
  }
  if (p.name) out.name = p.name;
  if (p.replaces?.length) out.replaces = p.replaces.map((r) => ({ name: r.name ?? "" }));
  return out;
}

function struct(s: StructMsg): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s.fields ?? {})) out[k] = value(v);
  return out;
}

function value(v: ValueMsg): unknown {
  if (v.structValue) return struct(v.structValue);
  if (v.listValue) return (v.listValue.values ?? []).map(value);
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.numberValue !== undefined) return v.numberValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return null;
}
