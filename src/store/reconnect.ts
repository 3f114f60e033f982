// How a Redis connection comes back: the reconnect delays, and a Sentinel master's lookup and switch bounded
// like a connect (redis-node.ts uses both for every node).
import type { RedisOptions } from "ioredis";

/** Reconnect delay cap: a restarted Redis is used again well within a second. */
const MAX_RECONNECT_DELAY_MS = 500;

/** The first attempt at once (a failover or a restart is usually over), then 50, 100, 200 ... ms. */
export const reconnectDelay = (times: number): number => (times <= 1 ? 0 : Math.min(25 * 2 ** Math.min(times - 1, 10), MAX_RECONNECT_DELAY_MS));

/** Sentinel: how long a master left at +switch-master gets to close its side before its socket is destroyed. */
const LEAVE_MASTER_MS = 20;

/** Sentinel mode: finding the master is bounded like connecting to it, and a failover is followed. */
export function sentinelBounds(lookupTimeoutMs: number, timeoutMs: number): RedisOptions {
  return {
    role: "master", // the scripts write: checked on every connect, a demoted master is left for the next lookup
    // All sentinels unreachable: ask again after the reconnect delay. (null would end the connection for
    // good: ioredis does not reconnect after a failed lookup.)
    sentinelRetryStrategy: reconnectDelay,
    sentinelCommandTimeout: lookupTimeoutMs, // a sentinel that accepts but never answers is skipped
    // The switch is followed by sluice's own watch (sentinel-switch.ts), which keeps its subscriptions
    // across reconnects; ioredis's remakes them at each connect and misses what is announced meanwhile.
    failoverDetector: false,
    // Leaving a master at the switch: a hung one never closes its side, so its socket is destroyed after
    // this, and the new master is looked up at once (a live one closes within a millisecond or two).
    disconnectTimeout: Math.min(timeoutMs, LEAVE_MASTER_MS),
    // A master turned replica refuses the scripts with READONLY (they did not run): reconnect through the
    // sentinels, never resend.
    reconnectOnError: (err) => err.message.startsWith("READONLY"),
  };
}
