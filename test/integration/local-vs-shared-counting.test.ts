// Why the counters are shared, with the shipped envoy.yaml + config/: a client sends to ten servers in turn.
// Counting alone (memory store) each server allows 120, so 10 x 120 = 1,200 pass in a minute; sharing one
// Redis, exactly 120 pass.
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EnvoyEdge } from "../helpers/envoy-actions.js";
import { OK, OVER_LIMIT, rlsClient, type RlsClient, type WireRequest, type WireResponse } from "../helpers/grpc-client.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { inOneMinute, localClock, type SecondsClock } from "../helpers/minute.js";
import { ROOT, startSluice, type SluiceProcess } from "../helpers/sluice.js";

const CONFIG_DIR = path.join(ROOT, "config");
const SERVERS = 10;
const SENT = 1300;

// One anonymous client: envoy.yaml sends [remote_address] for it, which config/ limits to 120 a minute.
const request: WireRequest = new EnvoyEdge().call({ method: "GET", path: "/orders", clientIp: "198.51.100.77" }).request!;

let sluices: SluiceProcess[] = [];
let clients: RlsClient[] = [];
let redis: RedisProcess | undefined;

afterEach(async () => {
  for (const c of clients) c.close();
  await Promise.all(sluices.map((s) => s.stop()));
  await redis?.stop();
  sluices = [];
  clients = [];
  redis = undefined;
});

async function startServers(args: string[], env: Record<string, string> = {}): Promise<void> {
  sluices = await Promise.all(Array.from({ length: SERVERS }, () => startSluice(["--config", CONFIG_DIR, ...args], env)));
  clients = sluices.map((s) => rlsClient(s.port));
}

/** Request i goes to server i mod 10, a few in flight per server; answers per server. */
async function sendInTurn(): Promise<WireResponse[][]> {
  const perServer: WireResponse[][] = clients.map(() => []);
  let next = 0;
  const worker = async () => {
    while (next < SENT) {
      const i = next++;
      perServer[i % SERVERS].push(await clients[i % SERVERS].shouldRateLimit(request));
    }
  };
  await Promise.all(Array.from({ length: 40 }, worker));
  return perServer;
}

const passed = (answers: WireResponse[]) => answers.filter((a) => a.overall_code === OK).length;
const refused = (answers: WireResponse[]) => answers.filter((a) => a.overall_code === OVER_LIMIT).length;

describe("ten servers, one client, limit 120 per minute per IP", () => {
  it("each server counting alone lets 10 x 120 = 1,200 through", async () => {
    expect(request.descriptors).toEqual([{ entries: [{ key: "remote_address", value: "198.51.100.77" }] }]);
    await startServers([]);
    // The memory store's clock is this machine's.
    const perServer = await inOneMinute(15, sendInTurn, localClock);
    expect(perServer.map(passed)).toEqual(Array(SERVERS).fill(120));
    expect(perServer.flat().length).toBe(SENT);
    expect(passed(perServer.flat())).toBe(1200);
    expect(refused(perServer.flat())).toBe(SENT - 1200);
  }, 180_000);

  it("ten servers sharing Redis let exactly 120 through", async () => {
    redis = await startRedis();
    // Bursts on a 2-core box can outlast the production store timeout; exactness needs a longer one (NOTES.md).
    await startServers(["--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "5000" });
    // Redis's clock decides the window.
    const redisClock: SecondsClock = async () => Number((await redis!.cli("TIME")).split("\n")[0]);
    const perServer = await inOneMinute(15, sendInTurn, redisClock);
    expect(perServer.flat().length).toBe(SENT);
    expect(passed(perServer.flat())).toBe(120);
    expect(refused(perServer.flat())).toBe(SENT - 120);
  }, 180_000);
});
