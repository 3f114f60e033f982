// Protobuf's JSON mapping (what Go's protojson reads and writes) over protobufjs's reflection of the
// same .proto files the gRPC server loads: JSON in -> the object form proto-loader gives (field names as
// in the .proto, enums and 64-bit integers as numbers, bytes as Buffers), and that form -> JSON out.
// protobufjs's own fromObject/toObject coerce silently ("abc" becomes 0), know the JSON names only with
// keepCase off, and none of the well-known types' JSON forms, so the mapping is walked here, driven
// by each message's fields: nothing per field is written by hand.
import { createRequire } from "node:module";
import path from "node:path";
import type * as Protobuf from "protobufjs";
import type { Enum, Field, Type } from "protobufjs";
import { PROTO_DIR } from "../../core/proto-dir.js";

/** JSON that does not fit the message: answered with 400 and this message. */
export class ProtoJsonError extends Error {}

type Obj = Record<string, unknown>;

let types: { request: Type; response: Type } | undefined;

/** RateLimitRequest and RateLimitResponse, loaded once. */
export function rlsJsonTypes(): { request: Type; response: Type } {
  if (!types) {
    // protobufjs is required at the first /json call, not at start: most processes never serve one.
    const protobuf = createRequire(import.meta.url)("protobufjs") as typeof Protobuf;
    const root = new protobuf.Root();
    // google/protobuf/* come bundled with protobufjs; the rest from protos/.
    root.resolvePath = (_origin, target) => (target.startsWith("google/protobuf/") ? target : path.join(PROTO_DIR, target));
    root.loadSync("envoy/service/ratelimit/v3/rls.proto", { keepCase: true });
    root.resolveAll();
    types = {
      request: root.lookupType("envoy.service.ratelimit.v3.RateLimitRequest"),
      response: root.lookupType("envoy.service.ratelimit.v3.RateLimitResponse"),
    };
  }
  return types;
}

/** protoc's json_name: hits_addend -> hitsAddend. */
export function jsonName(protoName: string): string {
  return protoName.replace(/_+([a-zA-Z0-9]?)/g, (_m, c: string) => c.toUpperCase());
}

const WRAPPERS = new Set(["Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes"].map((t) => `.google.protobuf.${t}Value`));
const INT32 = new Set(["int32", "sint32", "sfixed32"]);
const UINT32 = new Set(["uint32", "fixed32"]);
const INT64 = new Set(["int64", "sint64", "sfixed64", "uint64", "fixed64"]);

// --- JSON -> object --------------------------------------------------------------------------------

/** A JSON value (already parsed) as `type`'s object form; throws ProtoJsonError naming the field. */
export function fromProtoJson(type: Type, json: unknown, at = ""): Obj {
  const wkt = wktFromJson(type, json, at);
  if (wkt !== undefined) return wkt;
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new ProtoJsonError(`${at || "the body"} must be a JSON object`);
  const byName = new Map<string, Field>();
  for (const f of type.fieldsArray) {
    byName.set(f.name, f);
    byName.set(jsonName(f.name), f);
  }
  const out: Obj = {};
  for (const [key, value] of Object.entries(json)) {
    const field = byName.get(key);
    const where = at ? `${at}.${key}` : key;
    if (!field) throw new ProtoJsonError(`unknown field ${where} (${type.name} has ${type.fieldsArray.map((f) => jsonName(f.name)).join(", ")})`);
    if (field.name in out) throw new ProtoJsonError(`field ${where} is given twice (by its JSON and its proto name)`);
    if (value === null && field.resolvedType?.fullName !== ".google.protobuf.Value") continue; // null = not set
    if (field.map) throw new ProtoJsonError(`${where}: map fields are not supported`);
    if (field.repeated) {
      if (!Array.isArray(value)) throw new ProtoJsonError(`${where} must be a JSON array`);
      out[field.name] = value.map((v, i) => fieldFromJson(field, v, `${where}[${i}]`));
    } else {
      out[field.name] = fieldFromJson(field, value, where);
    }
  }
  return out;
}

function fieldFromJson(field: Field, value: unknown, at: string): unknown {
  const t = field.resolvedType;
  if (t && "fieldsArray" in t) return fromProtoJson(t as Type, value, at);
  if (t) return enumFromJson(t as Enum, value, at);
  return scalarFromJson(field.type, value, at);
}

function enumFromJson(e: Enum, value: unknown, at: string): number {
  if (typeof value === "string") {
    const n = e.values[value];
    if (n === undefined) throw new ProtoJsonError(`${at}: '${value}' is not one of ${Object.keys(e.values).join(", ")}`);
    return n;
  }
  if (typeof value === "number" && Number.isInteger(value) && Math.abs(value) <= 2 ** 31) return value;
  throw new ProtoJsonError(`${at} must be an enum name or number`);
}

function scalarFromJson(type: string, value: unknown, at: string): unknown {
  switch (type) {
    case "string":
      if (typeof value !== "string") throw new ProtoJsonError(`${at} must be a string`);
      return value;
    case "bool":
      if (typeof value !== "boolean") throw new ProtoJsonError(`${at} must be true or false`);
      return value;
    case "bytes":
      if (typeof value !== "string" || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(value)) throw new ProtoJsonError(`${at} must be base64`);
      return Buffer.from(value, "base64");
    case "double":
    case "float":
      return floatFromJson(value, at);
  }
  if (INT32.has(type)) return intFromJson(value, at, -(2 ** 31), 2 ** 31 - 1);
  if (UINT32.has(type)) return intFromJson(value, at, 0, 2 ** 32 - 1);
  if (INT64.has(type)) {
    // Numbers in JavaScript: 64-bit values beyond 2^53 cannot be held exactly, so they are refused.
    const min = type.startsWith("u") || type.startsWith("fixed") ? 0 : -Number.MAX_SAFE_INTEGER;
    return intFromJson(value, at, min, Number.MAX_SAFE_INTEGER);
  }
  throw new ProtoJsonError(`${at}: field type ${type} is not supported`);
}

function intFromJson(value: unknown, at: string, min: number, max: number): number {
  const n = typeof value === "number" ? value : typeof value === "string" && /^-?\d+(\.0*)?([eE]\+?\d+)?$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < min || n > max) throw new ProtoJsonError(`${at} must be an integer from ${min} to ${max} (a number or a string)`);
  return n;
}

function floatFromJson(value: unknown, at: string): number {
  if (typeof value === "number") return value;
  if (value === "NaN") return NaN;
  if (value === "Infinity") return Infinity;
  if (value === "-Infinity") return -Infinity;
  if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) return Number(value);
  throw new ProtoJsonError(`${at} must be a number`);
}

/** The well-known types' own JSON forms; undefined for any other message. */
function wktFromJson(type: Type, json: unknown, at: string): Obj | undefined {
  const name = type.fullName;
  if (WRAPPERS.has(name)) return { value: fieldFromJson(type.fields.value, json, at) };
  if (name === ".google.protobuf.Duration") return durationFromJson(json, at);
  if (name === ".google.protobuf.Struct") {
    if (typeof json !== "object" || json === null || Array.isArray(json)) throw new ProtoJsonError(`${at} must be a JSON object`);
    return { fields: Object.fromEntries(Object.entries(json).map(([k, v]) => [k, valueFromJson(v)])) };
  }
  if (name === ".google.protobuf.Value") return valueFromJson(json);
  if (name === ".google.protobuf.ListValue") {
    if (!Array.isArray(json)) throw new ProtoJsonError(`${at} must be a JSON array`);
    return { values: json.map(valueFromJson) };
  }
  return undefined;
}

function valueFromJson(v: unknown): Obj {
  if (v === null) return { nullValue: 0 };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(valueFromJson) } };
  return { structValue: { fields: Object.fromEntries(Object.entries(v as Obj).map(([k, x]) => [k, valueFromJson(x)])) } };
}

function durationFromJson(json: unknown, at: string): Obj {
  const m = typeof json === "string" ? /^(-)?(\d{1,12})(?:\.(\d{1,9}))?s$/.exec(json) : null;
  if (!m) throw new ProtoJsonError(`${at} must be a duration like "1.5s"`);
  const sign = m[1] ? -1 : 1;
  return { seconds: sign * Number(m[2]), nanos: sign * Number((m[3] ?? "").padEnd(9, "0")) };
}

// --- object -> JSON --------------------------------------------------------------------------------

/** `type`'s object form (as proto-loader and wire-response.ts build it) as protojson: JSON names, defaults left out. */
export function toProtoJson(type: Type, obj: Obj): unknown {
  const wkt = wktToJson(type, obj);
  if (wkt !== undefined) return wkt;
  const out: Obj = {};
  for (const field of type.fieldsArray) {
    const value = obj[field.name];
    if (value === undefined || value === null) continue;
    if (field.repeated) {
      if (!Array.isArray(value) || value.length === 0) continue;
      out[jsonName(field.name)] = value.map((v) => fieldToJson(field, v));
    } else if (field.resolvedType && "fieldsArray" in field.resolvedType) {
      out[jsonName(field.name)] = fieldToJson(field, value); // a set message is written even when empty
    } else if (!isDefault(value)) {
      out[jsonName(field.name)] = fieldToJson(field, value);
    }
  }
  return out;
}

function isDefault(v: unknown): boolean {
  return v === 0 || v === "" || v === false || (v instanceof Uint8Array && v.length === 0);
}

function fieldToJson(field: Field, value: unknown): unknown {
  const t = field.resolvedType;
  if (t && "fieldsArray" in t) return toProtoJson(t as Type, value as Obj);
  if (t) return (t as Enum).valuesById[value as number] ?? value;
  if (field.type === "bytes") return Buffer.from(value as Uint8Array).toString("base64");
  if (INT64.has(field.type)) return String(value);
  if ((field.type === "double" || field.type === "float") && !Number.isFinite(value as number)) return String(value);
  return value;
}

function wktToJson(type: Type, obj: Obj): unknown {
  const name = type.fullName;
  if (WRAPPERS.has(name)) return fieldToJson(type.fields.value, obj.value ?? defaultOf(type.fields.value.type));
  if (name === ".google.protobuf.Duration") return durationToJson(Number(obj.seconds ?? 0), Number(obj.nanos ?? 0));
  if (name === ".google.protobuf.Struct") return structToJson(obj);
  if (name === ".google.protobuf.Value") return valueToJson(obj);
  if (name === ".google.protobuf.ListValue") return ((obj.values as Obj[] | undefined) ?? []).map(valueToJson);
  return undefined;
}

function defaultOf(type: string): unknown {
  return type === "string" ? "" : type === "bool" ? false : type === "bytes" ? Buffer.alloc(0) : 0;
}

function structToJson(obj: Obj): Obj {
  const fields = (obj.fields as Record<string, Obj> | undefined) ?? {};
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, valueToJson(v)]));
}

function valueToJson(v: Obj): unknown {
  if (v.structValue !== undefined) return structToJson(v.structValue as Obj);
  if (v.listValue !== undefined) return (((v.listValue as Obj).values as Obj[] | undefined) ?? []).map(valueToJson);
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.numberValue !== undefined) return v.numberValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return null;
}

/** "60s", "1.500s": protojson writes 0, 3, 6 or 9 fraction digits. */
function durationToJson(seconds: number, nanos: number): string {
  const negative = seconds < 0 || nanos < 0;
  const s = Math.abs(seconds);
  const n = Math.abs(nanos);
  let frac = "";
  if (n !== 0) {
    frac = String(n).padStart(9, "0");
    frac = "." + (frac.endsWith("000000") ? frac.slice(0, 3) : frac.endsWith("000") ? frac.slice(0, 6) : frac);
  }
  return `${negative ? "-" : ""}${s}${frac}s`;
}
