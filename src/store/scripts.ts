// Composes lua/*.lua into the two scripts of the Redis store: apply (one atomic decision per group of
// checks) and refund (give back what apply consumed when another node refused the request).
import fs from "node:fs";
import type { Check, CheckResult } from "./store.js";

const LUA_DIR = new URL("../../lua/", import.meta.url);

/** Algorithm ids as the Lua files register them (ALGOS[id]). */
export const ALGORITHM_IDS: Record<Check["algorithm"], number> = { fixed_window: 1, token_bucket: 2, quota: 3 };

/** Reply integers per check: allowed, remaining, reset seconds, retry-after ms, period end ms. */
export const REPLY_PER_CHECK = 5;

let composed: { apply: string; refund: string } | undefined;

function scripts(): { apply: string; refund: string } {
  if (!composed) {
    // Redis forbids globals in scripts; the algorithm files register into this local table.
    const common = ["local ALGOS = {}", read("fixed_window.lua"), read("token_bucket.lua"), read("quota.lua"), read("checks.lua")];
    composed = { apply: [...common, read("apply.lua")].join("\n"), refund: [...common, read("refund.lua")].join("\n") };
  }
  return composed;
}

export const applyScript = (): string => scripts().apply;
export const refundScript = (): string => scripts().refund;

/**
 * numkeys, KEYS, then ARGV for one script call (see lua/checks.lua). `nowMicros` undefined = the script
 * reads Redis TIME; a number pins the time (a clock seam for tests and replays).
 */
export function scriptArgs(checks: readonly Check[], nowMicros: number | undefined, refs?: readonly CheckResult[]): (string | number)[] {
  const keys: string[] = [];
  const argv: (string | number)[] = [nowMicros === undefined ? "" : nowMicros, checks.length];
  for (let i = 0; i < checks.length; i++) {
    const c = checks[i];
    keys.push(c.key);
    // Numbers go as they are: ioredis writes String(n), the shortest round-trip form, which Lua reads back exactly.
    argv.push(ALGORITHM_IDS[c.algorithm], c.capacity, c.windowSeconds, c.refillPerSecond, c.hits, c.shadow ? 1 : 0, refs ? refs[i].periodEndMs : 0);
    if (c.periods) {
      keys.push(c.periods.nextKey);
      argv.push(c.periods.startMs, c.periods.boundaryMs, c.periods.endMs);
    }
  }
  return [keys.length, ...keys, ...argv];
}

/** The apply reply as results; throws on a malformed reply. */
export function parseApplyReply(reply: unknown, count: number): CheckResult[] {
  if (!Array.isArray(reply) || reply.length !== count * REPLY_PER_CHECK) {
    throw new Error("unexpected rate-limit script reply");
  }
  const out: CheckResult[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const b = i * REPLY_PER_CHECK;
    out[i] = {
      allowed: reply[b] === 1,
      remaining: Number(reply[b + 1]),
      resetSeconds: Number(reply[b + 2]),
      retryAfterMs: Number(reply[b + 3]),
      periodEndMs: Number(reply[b + 4]),
    };
  }
  return out;
}

function read(name: string): string {
  return fs.readFileSync(new URL(name, LUA_DIR), "utf8");
}
