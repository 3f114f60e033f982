// Composes lua/*.lua into the scripts of the Redis store: apply (one atomic decision per group of
// checks), refund (give back what apply consumed when another node refused the request) and lease
// (approximate limits: give back unused units, take new ones). Wire ids and layouts come from the algorithm registry, written in as algo(id).
// Two forms of the same text: one function library for Redis 7+ (FUNCTION LOAD once per node, FCALL:
// the algorithm tables are built once, not on every call), and three scripts for EVALSHA (older Redis).
import { createHash } from "node:crypto";
import fs from "node:fs";
import { ODD_WINDOW_SUFFIX } from "../core/keys.js";
import { ALGORITHMS, algorithm } from "../counters/registry.js";
import type { Check, CheckResult, LeaseEntry, LeaseReply } from "./store.js";

const LUA_DIR = new URL("../../lua/", import.meta.url);

/** A composed script: its text and SHA-1 (EVALSHA), and its function's name in the library (FCALL). */
export interface StoreScript {
  readonly lua: string;
  readonly sha: string;
  readonly fn: string;
}

/** The function library: its name and text (FUNCTION LOAD). */
interface StoreLibrary {
  readonly name: string;
  readonly code: string;
}

interface Scripts {
  apply: StoreScript;
  refund: StoreScript;
  lease: StoreScript;
  library: StoreLibrary;
}

let composed: Scripts | undefined;

const DRIVERS = ["apply", "refund", "lease"] as const;

function scripts(): Scripts {
  if (!composed) {
    // Redis forbids globals in scripts; the algorithm files register into this local table.
    const common = [
      "local ALGOS = {}",
      `local ODD_WINDOW_SUFFIX = '${ODD_WINDOW_SUFFIX}'`,
      read("globals.lua"),
      read("args.lua"),
      read("clock.lua"),
      read("reply.lua"),
      read("count.lua"),
      ...ALGORITHMS.map((a) => read(`${a.name}.lua`)),
      byIdTable(),
      read("checks.lua"),
    ].join("\n");
    const drivers = Object.fromEntries(DRIVERS.map((d) => [d, read(`${d}.lua`)])) as Record<(typeof DRIVERS)[number], string>;
    // A library's top level runs at FUNCTION LOAD, where only `redis` exists (no math, struct ...): the
    // algorithm files build their tables on first use in a call (algo(id)), which then persist.
    // Named by its text: instances of different versions sharing a Redis each call their own library.
    const body = [common, ...DRIVERS.map((d) => `redis.register_function('@FN_${d}', function(KEYS, ARGV)\n${drivers[d]}\nend)`)].join("\n");
    const name = `sluice_${createHash("sha1").update(body).digest("hex").slice(0, 16)}`;
    const fn = (d: string) => `${name}_${d}`;
    const library = { name, code: `#!lua name=${name}\n${body.replace(/@FN_(\w+)/g, (_, d: string) => fn(d))}` };
    const script = (d: (typeof DRIVERS)[number]): StoreScript => {
      const lua = `${common}\n${drivers[d]}`;
      return { lua, sha: createHash("sha1").update(lua).digest("hex"), fn: fn(d) };
    };
    composed = { apply: script("apply"), refund: script("refund"), lease: script("lease"), library };
  }
  return composed;
}

/**
 * The registry's wire layout as Lua: algo(id) builds an algorithm on its first use in a call, with its
 * parameter names, key count and reply shape (a script runs its whole text on every call, so nothing
 * is built for algorithms the call does not use).
 */
function byIdTable(): string {
  const lines = ["local BY_ID = {}", "local function algo(id)", "  local a = BY_ID[id]", "  if a then return a end"];
  ALGORITHMS.forEach((a, i) => {
    const params = a.wire.params.map((p) => `'${p}'`).join(", ");
    lines.push(`  ${i === 0 ? "if" : "elseif"} id == ${a.wire.id} then`);
    lines.push(`    a = ALGOS.${a.name}()`, `    a.params, a.nkeys, a.reports_end = { ${params} }, ${a.wire.keys}, ${a.wire.reportsEnd}`);
  });
  lines.push("  else return nil end", "  BY_ID[id] = a", "  return a", "end");
  return lines.join("\n");
}

export const applyScript = (): StoreScript => scripts().apply;
export const refundScript = (): StoreScript => scripts().refund;
export const leaseScript = (): StoreScript => scripts().lease;
/** Every script a node must hold (SCRIPT LOAD at connect, EVALSHA mode). */
export const allScripts = (): StoreScript[] => [scripts().apply, scripts().refund, scripts().lease];
/** The function library a node must hold (FUNCTION LOAD at connect, Redis 7+). */
export const storeLibrary = (): StoreLibrary => scripts().library;

/**
 * The lease call's arguments (lua/lease.lua): each entry's check with the units wanted as hits and the end
 * of the window its give-back was charged in as ref, then per entry the least units worth taking (need)
 * and the units given back.
 */
export function leaseArgs(entries: readonly LeaseEntry[], nowMicros: number | undefined): ScriptArgs {
  const checks = entries.map((e) => ({ ...e.check, hits: e.want, shadow: false }) as Check);
  const refs = entries.map((e) => ({ periodEndMs: e.backEndMs }) as CheckResult);
  const args = scriptArgs(checks, nowMicros, refs, false, 2 * entries.length);
  const numbers = args[args.length - 1] as Buffer;
  let at = numbers.length - 16 * entries.length;
  for (const e of entries) {
    at = numbers.writeDoubleLE(e.need, at);
    at = numbers.writeDoubleLE(e.back, at);
  }
  return args;
}

/** The lease reply: the store's time, then per entry the units taken and the probe's decision (lua/lease.lua). */
export function parseLeaseReply(reply: unknown, entries: readonly LeaseEntry[]): LeaseReply {
  const bad = () => new Error("unexpected lease script reply");
  if (!Array.isArray(reply) || reply.length !== 1 + 6 * entries.length) throw bad();
  for (const v of reply) if (typeof v !== "number") throw bad();
  const v = reply as number[];
  const results: LeaseReply["results"] = new Array(entries.length);
  for (let i = 0; i < entries.length; i++) {
    const o = 1 + 6 * i;
    const allowed = v[o + 1] === 1;
    results[i] = {
      taken: v[o],
      probe: { allowed, remaining: v[o + 2], resetSeconds: v[o + 3], retryAfterMs: allowed ? -1 : v[o + 4], periodEndMs: v[o + 5] },
    };
  }
  return { nowUs: v[0], results };
}

/** A script call's arguments: numkeys, KEYS, then the call's numbers as one string of doubles (lua/args.lua). */
export type ScriptArgs = (string | number | Buffer)[];

/** What a script call's numbers say instead of a time: read Redis TIME (lua/clock.lua). */
const REDIS_TIME = -1;

/**
 * numkeys, KEYS, then ARGV for one script call, in one array (see lua/checks.lua). ARGV is one string: the
 * call's numbers as little-endian doubles (lua/args.lua), read by Redis in C and exactly the numbers given.
 * `nowMicros` undefined = the script reads Redis TIME; a number pins the time (a clock seam for tests and
 * replays). `refs` (refund and lease): each check's apply result, whose period end the refund checks.
 * `dryRun` (apply only): evaluate as refused, consume nothing; sent as a negative check count. `extra`:
 * room for that many numbers after the checks', zero until the caller writes them (leaseArgs).
 */
export function scriptArgs(checks: readonly Check[], nowMicros: number | undefined, refs?: readonly CheckResult[], dryRun = false, extra = 0): ScriptArgs {
  // One array and one buffer, sized up front: this runs on every store call.
  let numKeys = 0;
  let numNumbers = 2 + extra;
  for (let i = 0; i < checks.length; i++) {
    const w = algorithm(checks[i].algorithm).wire;
    numKeys += w.keys;
    numNumbers += 3 + (refs ? 1 : 0) + w.params.length;
  }
  const out: ScriptArgs = new Array(2 + numKeys);
  const numbers = Buffer.alloc(8 * numNumbers);
  out[0] = numKeys;
  let k = 1;
  let at = numbers.writeDoubleLE(nowMicros === undefined ? REDIS_TIME : nowMicros, 0);
  at = numbers.writeDoubleLE(dryRun ? -checks.length : checks.length, at);
  for (let i = 0; i < checks.length; i++) {
    const c = checks[i];
    const alg = algorithm(c.algorithm);
    if (alg.wire.keys === 1) out[k++] = c.key;
    else for (const key of alg.keys(c)) out[k++] = key;
    at = numbers.writeDoubleLE(c.shadow ? -alg.wire.id : alg.wire.id, at);
    at = numbers.writeDoubleLE(c.capacity, at);
    at = numbers.writeDoubleLE(c.hits, at);
    if (refs) at = numbers.writeDoubleLE(refs[i].periodEndMs, at);
    for (const p of alg.params(c)) at = numbers.writeDoubleLE(p, at);
  }
  out[k] = numbers;
  return out;
}

/**
 * The apply reply as results: one string of little-endian doubles (lua/reply.lua), two to four per check by
 * outcome and whether the algorithm reports an end (layout in lua/apply.lua); throws on a malformed reply.
 * Each number is truncated toward zero, as Redis does when it turns a Lua number into an integer reply, and a
 * -0 (Lua's ceil of a small negative) read as 0, as an integer reply has no -0.
 */
export function parseApplyReply(reply: unknown, checks: readonly Check[]): CheckResult[] {
  if (!Buffer.isBuffer(reply) || reply.length % 8 !== 0) throw new Error("unexpected rate-limit script reply");
  const count = reply.length / 8;
  const out: CheckResult[] = new Array(checks.length);
  let j = 0;
  for (let i = 0; i < checks.length; i++) {
    // Enough numbers left for the shortest layout: a reply too short fails here, not with a read past its end.
    if (j + 2 > count) throw new Error("unexpected rate-limit script reply");
    const first = replyNumber(reply, j);
    const allowed = first >= 0;
    const resetSeconds = replyNumber(reply, j + 1);
    j += 2;
    const reportsEnd = algorithm(checks[i].algorithm).wire.reportsEnd;
    if (j + (allowed ? 0 : 1) + (reportsEnd ? 1 : 0) > count) throw new Error("unexpected rate-limit script reply");
    const retryAfterMs = allowed ? -1 : replyNumber(reply, j++);
    const periodEndMs = reportsEnd ? replyNumber(reply, j++) : 0;
    out[i] = { allowed, remaining: allowed ? first : -first - 1, resetSeconds, retryAfterMs, periodEndMs };
  }
  if (j !== count) throw new Error("unexpected rate-limit script reply");
  return out;
}

/** The j-th number of a reply of doubles, as Redis would have given it as an integer (see parseApplyReply). */
function replyNumber(reply: Buffer, j: number): number {
  return Math.trunc(reply.readDoubleLE(8 * j)) + 0;
}

function read(name: string): string {
  return fs.readFileSync(new URL(name, LUA_DIR), "utf8");
}
