// Every key a Redis writes while watched, from its keyspace notifications: keys that expire before a test could
// SCAN for them (a one-second window's) are still seen.
import { Redis } from "ioredis";
import type { RedisProcess } from "./redis-server.js";
import { until } from "./wait.js";

export interface KeyWatch {
  /** Keys written (any command that changed them) since watching began. */
  keys: Set<string>;
  /** Resolves once every notification sent before it was called has arrived. */
  settle(): Promise<void>;
  close(): void;
}

const PREFIX = "__keyspace@0__:";
const MARK = "key-watch:settled";

export async function watchKeys(redis: RedisProcess): Promise<KeyWatch> {
  await redis.cli("CONFIG", "SET", "notify-keyspace-events", "KA");
  const sub = new Redis({ host: "127.0.0.1", port: redis.port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await sub.connect();
  const keys = new Set<string>();
  let marks = 0;
  sub.on("pmessage", (_pattern: string, channel: string, event: string) => {
    const key = channel.slice(PREFIX.length);
    if (key === MARK) marks += event === "set" ? 1 : 0;
    else keys.add(key);
  });
  await sub.psubscribe(`${PREFIX}*`);
  return {
    keys,
    async settle() {
      // Notifications arrive in order: once this SET's arrives, every earlier one has.
      const want = marks + 1;
      await redis.cli("SET", MARK, "1", "PX", "60000");
      await until(() => marks >= want, 10_000, "the key watch's own mark");
    },
    close: () => sub.disconnect(),
  };
}
