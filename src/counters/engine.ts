// The in-process engine: lua/apply.lua and lua/refund.lua in TypeScript, over any keyspace that
// behaves like Redis (a key is gone once its expiry has passed). Every store that counts in this
// process (the memory store, the local fallback) runs it, so all of them answer as Redis does.
import type { Algorithm } from "./algorithm.js";
import type { Bound, CheckResult, Stored } from "./check.js";
import { algorithm, type Check } from "./registry.js";

/** Where the engine keeps its values. */
export interface Keyspace {
  /** The live value of a key (undefined once expired), marked as used. */
  get(key: string, nowMs: number): Stored | undefined;
  set(key: string, value: Stored): void;
}

interface Placed {
  a: Algorithm<Check>;
  b: Bound;
}

function place(checks: readonly Check[], nowMs: number): Placed[] {
  const out = new Array<Placed>(checks.length);
  for (let i = 0; i < checks.length; i++) {
    const a = algorithm(checks[i].algorithm);
    out[i] = { a, b: a.bind(checks[i], nowMs) };
  }
  return out;
}

/**
 * Evaluates the checks atomically (all or nothing, as apply.lua): if a non-shadow check refuses, or
 * on a dry run, nothing is saved and the allowed checks report what is still there. The same key
 * twice in one call counts twice.
 */
export function applyChecks(space: Keyspace, checks: readonly Check[], dryRun: boolean, nowUs: number): CheckResult[] {
  const nowMs = Math.floor(nowUs / 1000);
  if (checks.length === 1) return [applyOne(space, checks[0], dryRun, nowUs, nowMs)];
  const placed = place(checks, nowMs);
  const n = checks.length;
  const results: CheckResult[] = new Array(n);
  const stored = new Map<string, unknown>(); // key -> level as read
  const pending = new Map<string, { i: number; level: unknown }>(); // key -> level after the last commit so far
  let blocked = dryRun;
  for (let i = 0; i < n; i++) {
    const c = checks[i];
    const { a, b } = placed[i];
    if (!stored.has(b.key)) stored.set(b.key, a.level(c, space.get(b.key, nowMs), nowUs, b));
    const p = pending.get(b.key);
    const v = a.decide(c, p ? p.level : stored.get(b.key), c.hits, nowUs, b);
    results[i] = { allowed: v.allowed, remaining: v.remaining, resetSeconds: v.resetSeconds, retryAfterMs: v.retryAfterMs, periodEndMs: v.periodEndMs };
    // An algorithm that counts refused requests (the reference's) commits whatever it decided.
    if ((v.allowed || a.countsRefused?.(c)) && c.hits > 0) pending.set(b.key, { i, level: v.after });
    if (!v.allowed && !c.shadow) blocked = true;
  }
  // Refused: only what counts refused requests is saved (nothing on a dry run).
  if (!blocked || !dryRun) {
    for (const [key, p] of pending) {
      const { a, b } = placed[p.i];
      if (!blocked || a.countsRefused?.(checks[p.i])) space.set(key, a.save(checks[p.i], p.level, nowUs, b));
    }
  }
  if (!blocked) return results;
  for (let i = 0; i < n; i++) {
    const c = checks[i];
    const { a, b } = placed[i];
    if (!results[i].allowed || c.hits === 0 || a.countsRefused?.(c)) continue;
    const v = a.decide(c, stored.get(b.key), 0, nowUs, b);
    results[i].remaining = v.remaining;
    results[i].resetSeconds = v.resetSeconds;
  }
  return results;
}

/** applyChecks of one check, step for step, without the maps that several checks of one key need. */
function applyOne(space: Keyspace, c: Check, dryRun: boolean, nowUs: number, nowMs: number): CheckResult {
  const a = algorithm(c.algorithm);
  const b = a.bind(c, nowMs);
  const level = a.level(c, space.get(b.key, nowMs), nowUs, b);
  const v = a.decide(c, level, c.hits, nowUs, b);
  const result: CheckResult = {
    allowed: v.allowed,
    remaining: v.remaining,
    resetSeconds: v.resetSeconds,
    retryAfterMs: v.retryAfterMs,
    periodEndMs: v.periodEndMs,
  };
  const counts = (v.allowed || a.countsRefused?.(c)) && c.hits > 0;
  const blocked = dryRun || (!v.allowed && !c.shadow);
  if (counts && !dryRun && (!blocked || a.countsRefused?.(c))) space.set(b.key, a.save(c, v.after, nowUs, b));
  if (!blocked || !result.allowed || c.hits === 0 || a.countsRefused?.(c)) return result;
  // Refused (a dry run): what is still there, as nothing was taken.
  const left = a.decide(c, level, 0, nowUs, b);
  result.remaining = left.remaining;
  result.resetSeconds = left.resetSeconds;
  return result;
}

/** Gives back what an applyChecks of these checks consumed (as refund.lua), judged by each result's period. */
export function refundChecks(space: Keyspace, checks: readonly Check[], results: readonly CheckResult[], nowUs: number): void {
  const nowMs = Math.floor(nowUs / 1000);
  const placed = place(checks, nowMs);
  for (let i = 0; i < checks.length; i++) {
    const c = checks[i];
    if (c.hits <= 0) continue;
    const { a, b } = placed[i];
    const next = a.refund(c, space.get(b.key, nowMs), c.hits, results[i].periodEndMs, nowUs, b);
    if (next) space.set(b.key, next);
  }
}
