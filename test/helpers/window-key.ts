// Where a fixed window's count is: the key in even windows, core/keys.ts oddWindowKey in odd ones. Tests
// that read Redis directly name the key by the window a call was decided in, never by a clock read later.
import { oddWindowKey } from "../../src/core/keys.js";
import { fixedWindowBind } from "../../src/counters/fixed_window/math.js";

/** The key of the window holding nowMs (a time the call was made at, or its window's end - 1). */
export function windowKey(key: string, windowSeconds: number, nowMs: number): string {
  return fixedWindowBind(key, windowSeconds, nowMs).key;
}

/** The key of the window a call reported, from its periodEndMs. */
export function windowKeyOfEnd(key: string, windowSeconds: number, periodEndMs: number): string {
  return windowKey(key, windowSeconds, periodEndMs - 1);
}

/** Both keys a fixed window may use. */
export function windowKeys(key: string): [string, string] {
  return [key, oddWindowKey(key)];
}

/** What `GET` answers for the newest window of a fixed-window key (the one of the two expiring last); "" when neither exists. */
export async function getWindowCount(cli: (...args: string[]) => Promise<string>, key: string): Promise<string> {
  let best = { expires: -Infinity, value: "" };
  for (const k of windowKeys(key)) {
    const value = (await cli("GET", k)).trim();
    if (value === "") continue;
    const expires = Number((await cli("PEXPIRETIME", k)).trim());
    if (expires > best.expires) best = { expires, value };
  }
  return best.value;
}

/** A fixed window's key without its odd-window suffix, for tests that list a store's keys by limit. */
export function windowBaseKey(key: string): string {
  return key.replace(/(:fw\d+):1$/, "$1");
}
