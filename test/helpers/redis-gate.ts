// A TCP relay in front of a real redis-server that can hold what clients send (a Redis that
// stalls), and counts the script calls it has seen, so a test knows which calls reached the store.
import net from "node:net";

export interface RedisGate {
  port: number;
  url: string;
  /** EVALSHA/EVAL commands seen from clients so far (held or not). */
  scriptCalls(): number;
  /** From now on, client bytes are kept instead of forwarded. */
  hold(): void;
  /** Forwards everything kept, in order, and stops holding. */
  release(): void;
  close(): Promise<void>;
}

export async function startRedisGate(redisPort: number): Promise<RedisGate> {
  let held = false;
  let calls = 0;
  const flushers = new Set<() => void>();
  const sockets = new Set<net.Socket>();

  const server = net.createServer((client) => {
    const upstream = net.connect(redisPort, "127.0.0.1");
    sockets.add(client).add(upstream);
    const kept: Buffer[] = [];
    let tail = "";
    const flush = () => {
      for (const chunk of kept.splice(0)) upstream.write(chunk);
    };
    flushers.add(flush);
    client.on("data", (chunk: Buffer) => {
      // Commands are RESP arrays; a command name is a bulk string. The tail catches a name split across chunks.
      // Only matches ending in the new chunk count: one lying wholly in the tail was counted before.
      const text = tail + chunk.toString("latin1").toLowerCase();
      for (const m of text.matchAll(/\r\neval(sha)?\r\n/g)) if (m.index! + m[0].length > tail.length) calls++;
      tail = text.slice(-10);
      if (held) kept.push(chunk);
      else upstream.write(chunk);
    });
    upstream.pipe(client);
    const end = () => {
      flushers.delete(flush);
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    scriptCalls: () => calls,
    hold: () => {
      held = true;
    },
    release: () => {
      held = false;
      for (const f of flushers) f();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
