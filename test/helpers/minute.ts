// Fixed windows of one minute in tests: a burst that straddles a minute boundary meets two windows and
// proves nothing. Time comes from the clock that decides (this machine's for the memory store, Redis TIME
// for Redis).
import { sleep } from "./wait.js";

export type SecondsClock = () => Promise<number>;

export const localClock: SecondsClock = async () => Date.now() / 1000;

/** Redis TIME as a SecondsClock (the clock that decides for a Redis store). */
export function redisClock(redis: { cli(...args: string[]): Promise<string> }): SecondsClock {
  return async () => {
    const [s, us] = (await redis.cli("TIME")).trim().split("\n").map(Number);
    return s + us / 1e6;
  };
}

/** Waits for the next epoch-aligned window of `windowSeconds` when fewer than `seconds` are left in this one. */
export async function roomInWindow(windowSeconds: number, seconds: number, clock: SecondsClock = localClock): Promise<void> {
  const left = windowSeconds - ((await clock()) % windowSeconds);
  if (left < seconds) await sleep(left * 1000 + 50);
}

/** Waits for the next minute when fewer than `seconds` are left in this one. */
export function roomInMinute(seconds: number, clock: SecondsClock = localClock): Promise<void> {
  return roomInWindow(60, seconds, clock);
}

/**
 * Runs `burst` with `room` seconds left in the minute. If it still straddled a boundary (a loaded machine),
 * runs it once more from the start of a minute that none of the first run touched, so every window-keyed
 * counter is fresh.
 */
export async function inOneMinute<T>(room: number, burst: () => Promise<T>, clock: SecondsClock = localClock): Promise<T> {
  await roomInMinute(room, clock);
  for (let attempt = 0; ; attempt++) {
    const start = Math.floor((await clock()) / 60);
    const result = await burst();
    const now = await clock();
    const end = Math.floor(now / 60);
    if (end === start || attempt === 1) return result;
    await sleep(((end + 1) * 60 - now) * 1000 + 50);
  }
}
