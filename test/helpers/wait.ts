// Waiting in tests: on an event (until), or for a stretch of time where time itself is what is tested (sleep).
import { setTimeout as sleepMs } from "node:timers/promises";

export const sleep = (ms: number): Promise<void> => sleepMs(ms);

/**
 * Polls `ready` every `everyMs` until it returns true; throws after `timeoutMs` with `what()` (or the last
 * error `ready` threw) as the message.
 */
export async function until(ready: () => boolean | Promise<boolean>, timeoutMs = 10_000, what: () => string = () => "condition", everyMs = 20): Promise<void> {
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
      throw new Error(`timed out after ${timeoutMs} ms: ${what()}${detail}`);
    }
    await sleep(everyMs);
  }
}
