// What an algorithm is, in one interface: its rule spec, its store check and wire layout, and its
// maths in TypeScript (mirroring its lua/<name>.lua step for step). registry.ts lists them.
import type { Ctx, Field } from "../core/yaml-fields.js";
import type { Bound, CheckBase, Stored, Verdict } from "./check.js";
import type { BaseLimit, Limit } from "./limit.js";

/** What building a limit's check needs besides the limit. */
interface CheckContext {
  /** The descriptor's hash tag text (core/keys.ts descriptorTag). */
  hashTag: string;
  keyPrefix: string;
  hits: number;
  shadow: boolean;
  /** Local clock, ms: a calendar quota sends the periods around it. */
  nowMs: number;
  /** The reference's key of the descriptor without its window start (core/keys.ts referenceKeyBase), in reference-keys mode. */
  referenceKey?: string;
  /** Reference-keys mode: a refused request counts too (the reference's default; STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true: no). */
  referenceCountsRefused?: boolean;
}

/** How the algorithm appears in rule files. */
interface RuleSpec<Name extends string = string> {
  /** Chosen by `algorithm:` in a rate_limit (the quota has a `quota:` block of its own instead). */
  inRateLimit: boolean;
  /** A descriptor key of its own instead (quota: `quota: {...}`), read by `parse`. */
  block?: { key: string; parse(ctx: Ctx, f: NonNullable<Field>, path: string): BaseLimit<Name> | undefined };
  /** rate_limit keys only this algorithm takes, integers >= their minimum (token bucket: burst >= 1). */
  ownKeys: readonly { key: string; min: number }[];
  /** A rate_limit of it may say `approximate: {...}` (counted locally, synced in batches). */
  approximate: boolean;
  /** Requests the limit holds at once, from requests_per_unit and the own keys given. */
  capacity(requestsPerUnit: number, own: ReadonlyMap<string, number>): number;
  /**
   * The last part of the store key, unique among the limits of one descriptor; `siblings` are all of
   * that descriptor's limits (a token bucket names its unit only when there are several).
   */
  keyTag(limit: Pick<Limit, "unit">, siblings: readonly Pick<Limit, "algorithm">[]): string;
  /** For `sluice explain`: how much and how it counts, e.g. "10 per minute, token_bucket, burst 20". */
  explain(limit: Limit): string;
  /** For /rlconfig, after the reference's own fields: "" or e.g. ", algorithm: token_bucket, burst: 20". */
  rlconfig(limit: Limit): string;
  /** For /rules: this algorithm's own settings (e.g. {burst: 20}); {} when none. */
  settings(limit: Limit): Record<string, string | number>;
}

/** The store's side: how the check travels to lua/<name>.lua (checks.lua reads it). */
interface WireSpec {
  /** Wire id (Lua: algo(id), written by store/lua-library.ts); negated on the wire for a shadow limit. */
  id: number;
  /** Names of the numbers after id, capacity and hits, as the Lua check table gets them. */
  params: readonly string[];
  /** Keys per check (a quota sends its two periods). */
  keys: 1 | 2;
  /** The reply carries the end of the window or period decided in. */
  reportsEnd: boolean;
}

export interface Algorithm<C extends CheckBase & { algorithm: string } = CheckBase & { algorithm: string }, Level = unknown> {
  readonly name: C["algorithm"];
  readonly rule: RuleSpec<C["algorithm"]>;
  readonly wire: WireSpec;
  /**
   * Whether a refusal of one hit says nothing of a larger cost's Retry-After (a refill or a sliding
   * weight frees capacity gradually); a deny note speaks only for costs it covers.
   */
  readonly retryDependsOnCost: boolean;
  /** Fully reset at the reported end of its window or period (else the reset seconds say when). */
  readonly resetsAtEnd: boolean;
  /** A calendar quota: its period end is the answer's quota reset time. */
  readonly calendar: boolean;

  check(limit: Limit, ctx: CheckContext): C;
  /**
   * The check commits its count even when the request is refused (the reference's increments); in Lua
   * the algorithm's bind sets c.counts_refused. Absent: never.
   */
  countsRefused?(c: C): boolean;
  /** The numbers of wire.params, in that order. */
  params(c: C): readonly number[];
  /** wire.keys keys, in order. */
  keys(c: C): readonly string[];
  /** With the capacity, what makes two checks of one key the same limit (a deny note's identity). */
  limitParam(c: C): number;

  // The maths, as lua/<name>.lua: the same order of floating-point operations, so answers are identical.
  /** The key and period this check uses at the store's time; throws when the time is outside what was sent. */
  bind(c: C, nowMs: number): Bound;
  level(c: C, stored: Stored | undefined, nowUs: number, b: Bound): Level;
  decide(c: C, level: Level, hits: number, nowUs: number, b: Bound): Verdict<Level>;
  save(c: C, level: Level, nowUs: number, b: Bound): Stored;
  /**
   * Refills continuously at this rate (a token bucket): a lease's unused tokens fade at it once the bucket
   * would have been full without the lease (approximate/lease.ts). Absent: a lease lasts to its window's end.
   */
  refillPerSecond?(c: C): number;
  /** A key's value as Redis holds it (GET), with its PEXPIRETIME, in this module's form; undefined when not one of ours. */
  decodeStored(raw: Buffer, expiresAtMs: number): Stored | undefined;
  /** What the key holds after giving back `hits` charged in the window or period ending at chargedEndMs; undefined: leave it. */
  refund(c: C, stored: Stored | undefined, hits: number, chargedEndMs: number, nowUs: number, b: Bound): Stored | undefined;
}

/** A key of its own: what most algorithms bind to. */
export function bindKey(c: CheckBase): Bound {
  return { key: c.key, periodEndMs: 0 };
}
