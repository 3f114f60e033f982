// A TCP fault proxy in front of a real redis-server (the kernel here has no netem and no iptables): it
// forwards both ways and can hold what clients send (a Redis that stalls), add latency, be a black hole
// (nothing passes either way until healed; held bytes then go on, as TCP would deliver them), reset every
// connection, refuse new ones, or flap (reset and refuse, then accept, in turns). It counts the script
// calls clients sent, so a test knows which calls reached the store.
import net from "node:net";
import { sleep } from "./wait.js";

export interface RedisGate {
  port: number;
  url: string;
  /** Script calls (FCALL, EVALSHA, EVAL) seen from clients so far (held or not). */
  scriptCalls(): number;
  /** Client connections open now. */
  connections(): number;
  /** From now on, client bytes are kept instead of forwarded. */
  hold(): void;
  /** Forwards everything kept, in order, and stops holding. */
  release(): void;
  /** Delays every chunk, both ways, by this much (0: none). */
  latency(ms: number): void;
  /** Nothing passes either way, connections stay open; heal() lets the kept bytes through. */
  blackhole(): void;
  heal(): void;
  /** Every open connection is reset (RST to the client). */
  reset(): void;
  /** While on, a new connection is reset as soon as it is accepted. */
  refuse(on: boolean): void;
  /** Resets and refuses for downMs, then accepts for upMs, `rounds` times; resolves when done (accepting). */
  flap(rounds: number, downMs: number, upMs: number): Promise<void>;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  /** Bytes kept per direction while held or black-holed. */
  up: Buffer[];
  down: Buffer[];
}

export async function startRedisGate(redisPort: number): Promise<RedisGate> {
  let held = false;
  let hole = false;
  let delayMs = 0;
  let refusing = false;
  let calls = 0;
  const pairs = new Set<Pair>();

  // Each direction keeps its order, as TCP does: a chunk sent after the latency dropped still waits for the
  // delayed ones before it (a reordered link would hand Redis's replies to the wrong calls).
  const delayed = new Map<net.Socket, { due: number; chunk: Buffer }[]>();
  const drain = (to: net.Socket) => {
    const q = delayed.get(to)!;
    while (q.length > 0 && q[0].due <= performance.now()) {
      const { chunk } = q.shift()!;
      if (!to.destroyed) to.write(chunk);
    }
    if (q.length === 0) delayed.delete(to);
    else setTimeout(drain, q[0].due - performance.now(), to);
  };
  const send = (to: net.Socket, chunk: Buffer) => {
    const q = delayed.get(to);
    if (delayMs <= 0 && !q) {
      to.write(chunk);
      return;
    }
    const due = performance.now() + delayMs;
    if (q) q.push({ due: Math.max(due, q[q.length - 1].due), chunk });
    else {
      delayed.set(to, [{ due, chunk }]);
      setTimeout(drain, delayMs, to);
    }
  };
  const flush = (p: Pair) => {
    for (const c of p.up.splice(0)) send(p.upstream, c);
    for (const c of p.down.splice(0)) send(p.client, c);
  };

  const server = net.createServer((client) => {
    if (refusing) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(redisPort, "127.0.0.1");
    const p: Pair = { client, upstream, up: [], down: [] };
    pairs.add(p);
    let tail = "";
    client.on("data", (chunk: Buffer) => {
      // Commands are RESP arrays; a command name is a bulk string. The tail catches a name split across chunks.
      // Only matches ending in the new chunk count: one lying wholly in the tail was counted before.
      const text = tail + chunk.toString("latin1").toLowerCase();
      for (const m of text.matchAll(/\r\n(?:eval(?:sha)?|fcall)\r\n/g)) if (m.index! + m[0].length > tail.length) calls++;
      tail = text.slice(-10);
      if (held || hole) p.up.push(chunk);
      else send(upstream, chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (hole) p.down.push(chunk);
      else send(client, chunk);
    });
    const end = () => {
      pairs.delete(p);
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  const reset = () => {
    for (const p of [...pairs]) {
      pairs.delete(p);
      p.client.resetAndDestroy();
      p.upstream.destroy();
    }
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    scriptCalls: () => calls,
    connections: () => pairs.size,
    hold: () => {
      held = true;
    },
    release: () => {
      held = false;
      if (!hole) for (const p of pairs) flush(p);
    },
    latency: (ms) => {
      delayMs = ms;
    },
    blackhole: () => {
      hole = true;
    },
    heal: () => {
      hole = false;
      if (!held) for (const p of pairs) flush(p);
    },
    reset,
    refuse: (on) => {
      refusing = on;
    },
    async flap(rounds, downMs, upMs) {
      for (let i = 0; i < rounds; i++) {
        refusing = true;
        reset();
        await sleep(downMs);
        refusing = false;
        await sleep(upMs);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const p of pairs) {
          p.client.destroy();
          p.upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
