// Composes lua/*.lua into the one script that evaluates all checks of a request (lua/apply.lua).
import fs from "node:fs";
import type { Check } from "./store.js";

const LUA_DIR = new URL("../../lua/", import.meta.url);

/** Algorithm ids as the Lua files register them (ALGOS[id]). */
export const ALGORITHM_IDS: Record<Check["algorithm"], number> = { fixed_window: 1, token_bucket: 2 };

/** ARGV entries per check: id, capacity, window seconds, refill per second, hits, shadow. */
export const ARGS_PER_CHECK = 6;
/** Reply integers per check: allowed, remaining, reset seconds, retry-after seconds. */
export const REPLY_PER_CHECK = 4;

let composed: string | undefined;

export function applyScript(): string {
  composed ??= [
    // Redis forbids globals in scripts; the algorithm files register into this local table.
    "local ALGOS = {}",
    read("fixed_window.lua"),
    read("token_bucket.lua"),
    read("apply.lua"),
  ].join("\n");
  return composed;
}

/** KEYS then ARGV for one request, as EVALSHA arguments after numkeys. */
export function scriptArgs(checks: readonly Check[]): string[] {
  const n = checks.length;
  const out: string[] = new Array(n + n * ARGS_PER_CHECK);
  for (let i = 0; i < n; i++) {
    const c = checks[i];
    out[i] = c.key;
    const b = n + i * ARGS_PER_CHECK;
    // String(n) is the shortest round-trip form; Lua's tonumber reads back the same double.
    out[b] = String(ALGORITHM_IDS[c.algorithm]);
    out[b + 1] = String(c.capacity);
    out[b + 2] = String(c.windowSeconds);
    out[b + 3] = String(c.refillPerSecond);
    out[b + 4] = String(c.hits);
    out[b + 5] = c.shadow ? "1" : "0";
  }
  return out;
}

function read(name: string): string {
  return fs.readFileSync(new URL(name, LUA_DIR), "utf8");
}
