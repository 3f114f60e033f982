// Waiting in tests: on an event (until), or for a stretch of time where time itself is what is tested (sleep).
// The only place in test/ that waits by the clock: test/unit/test-tree.test.ts fails on another sleep or until.
import { setTimeout as sleepMs } from "node:timers/promises";

export const sleep = (ms: number): Promise<void> => sleepMs(ms);

/**
 * Polls `ready` every `everyMs` until it returns true; throws after `timeoutMs` with `what` (a text, or a
 * function read at the timeout, for state worth showing) and the last error `ready` threw (errors count as
 * not yet).
 */
export async function until(
  ready: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what: string | (() => string) = "condition",
  everyMs = 20,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      if (await ready()) return;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
      throw new Error(`timed out after ${timeoutMs} ms: ${typeof what === "string" ? what : what()}${detail}`);
    }
    await sleep(everyMs);
  }
}
