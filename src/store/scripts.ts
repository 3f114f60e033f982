// Composes lua/*.lua into the two scripts of the Redis store: apply (one atomic decision per group of
// checks) and refund (give back what apply consumed when another node refused the request).
import { createHash } from "node:crypto";
import fs from "node:fs";
import { checkParam, type Check, type CheckResult } from "./store.js";

const LUA_DIR = new URL("../../lua/", import.meta.url);

/** Algorithm ids as the Lua files register them (ALGOS[id]); negated on the wire for a shadow limit. */
export const ALGORITHM_IDS: Record<Check["algorithm"], number> = { fixed_window: 1, token_bucket: 2, quota: 3 };

/** A composed script and its SHA-1, the name EVALSHA calls it by. */
export interface StoreScript {
  readonly lua: string;
  readonly sha: string;
}

let composed: { apply: StoreScript; refund: StoreScript } | undefined;

function scripts(): { apply: StoreScript; refund: StoreScript } {
  if (!composed) {
    // Redis forbids globals in scripts; the algorithm files register into this local table.
    const common = ["local ALGOS = {}", read("count.lua"), read("fixed_window.lua"), read("token_bucket.lua"), read("quota.lua"), read("checks.lua")];
    composed = { apply: script([...common, read("apply.lua")].join("\n")), refund: script([...common, read("refund.lua")].join("\n")) };
  }
  return composed;
}

function script(lua: string): StoreScript {
  return { lua, sha: createHash("sha1").update(lua).digest("hex") };
}

export const applyScript = (): StoreScript => scripts().apply;
export const refundScript = (): StoreScript => scripts().refund;

/**
 * numkeys, KEYS, then ARGV for one script call, in one array (see lua/checks.lua). `nowMicros`
 * undefined = the script reads Redis TIME; a number pins the time (a clock seam for tests and
 * replays). `refs` (refund only): each check's apply result, whose period end the refund checks.
 * `dryRun` (apply only): evaluate as refused, consume nothing; sent as a negative check count.
 */
export function scriptArgs(checks: readonly Check[], nowMicros: number | undefined, refs?: readonly CheckResult[], dryRun = false): (string | number)[] {
  let numKeys = checks.length;
  for (let i = 0; i < checks.length; i++) if (checks[i].periods) numKeys++;
  const out: (string | number)[] = new Array(1 + numKeys + 2);
  out[0] = numKeys;
  let k = 1;
  let a = 1 + numKeys;
  out[a++] = nowMicros === undefined ? "" : nowMicros;
  out[a++] = dryRun ? -checks.length : checks.length;
  for (let i = 0; i < checks.length; i++) {
    const c = checks[i];
    out[k++] = c.key;
    // Numbers go as they are: ioredis writes String(n), the shortest round-trip form, which Lua reads back exactly.
    const id = ALGORITHM_IDS[c.algorithm];
    out[a++] = c.shadow ? -id : id;
    out[a++] = c.capacity;
    out[a++] = checkParam(c);
    out[a++] = c.hits;
    if (refs) out[a++] = refs[i].periodEndMs;
    if (c.periods) {
      out[k++] = c.periods.nextKey;
      out[a++] = c.periods.startMs;
      out[a++] = c.periods.boundaryMs;
      out[a++] = c.periods.endMs;
    }
  }
  return out;
}

/**
 * The apply reply as results (layout in lua/apply.lua: two to four integers per check, by outcome
 * and algorithm); throws on a malformed reply.
 */
export function parseApplyReply(reply: unknown, checks: readonly Check[]): CheckResult[] {
  if (!Array.isArray(reply)) throw new Error("unexpected rate-limit script reply");
  for (let j = 0; j < reply.length; j++) if (typeof reply[j] !== "number") throw new Error("unexpected rate-limit script reply");
  const values = reply as number[];
  const out: CheckResult[] = new Array(checks.length);
  let j = 0;
  for (let i = 0; i < checks.length; i++) {
    const first = values[j];
    const allowed = first >= 0;
    const resetSeconds = values[j + 1];
    j += 2;
    const retryAfterMs = allowed ? -1 : values[j++];
    const periodEndMs = checks[i].algorithm === "token_bucket" ? 0 : values[j++];
    out[i] = { allowed, remaining: allowed ? first : -first - 1, resetSeconds, retryAfterMs, periodEndMs };
  }
  // Also catches a reply too short: the reads past its end above gave undefined.
  if (j !== values.length) throw new Error("unexpected rate-limit script reply");
  return out;
}

function read(name: string): string {
  return fs.readFileSync(new URL(name, LUA_DIR), "utf8");
}
