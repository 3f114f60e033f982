// A small process: `sluice serve` loads what its configuration uses and nothing else. What a
// memory-store start never needs (ioredis, the xDS client's gRPC library, tracing, statsd, node's bundled
// undici, which an ESM import of node:http pulls in) stays unloaded; a Redis store loads ioredis.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ROOT, startSluice } from "../helpers/sluice.js";

const PRELOAD = path.join(ROOT, "test/fixtures/loaded-modules.mjs");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-modules-"));
fs.writeFileSync(path.join(dir, "one.yaml"), "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 100}\n");
let redis: RedisProcess | undefined;

afterAll(async () => {
  await redis?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Starts sluice with these args, stops it, and returns what it had loaded. */
async function loadedBy(args: string[], name: string): Promise<{ builtins: string[]; packages: Set<string> }> {
  const file = path.join(dir, `${name}.json`);
  const sluice = await startSluice(["--config", dir, ...args], { NODE_OPTIONS: `--import=${PRELOAD}`, LOADED_MODULES_FILE: file });
  expect(await sluice.stop()).toBe(0);
  const { builtins, files } = JSON.parse(fs.readFileSync(file, "utf8")) as { builtins: string[]; files: string[] };
  const packages = new Set(files.map((f) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1]).filter((p): p is string => p !== undefined));
  return { builtins, packages };
}

const UNUSED_BY_A_MEMORY_STORE = [
  "ioredis",
  "@grpc/grpc-js",
  "@opentelemetry/sdk-trace",
  "@opentelemetry/exporter-trace-otlp-grpc",
  "@opentelemetry/exporter-trace-otlp-http",
  "@opentelemetry/exporter-trace-otlp-proto",
  "hot-shots",
];

describe("what sluice serve loads", () => {
  it("on the memory store: none of the Redis client, the xDS client, tracing, statsd or node's bundled undici", async () => {
    const { builtins, packages } = await loadedBy([], "memory");
    expect(packages.has("pino")).toBe(true); // the preload sees the packages sluice loads
    expect(UNUSED_BY_A_MEMORY_STORE.filter((p) => packages.has(p))).toEqual([]);
    expect(builtins.filter((m) => m.includes("undici"))).toEqual([]);
  });

  it("on a Redis store: ioredis, and still no undici", async () => {
    redis = await startRedis();
    const { builtins, packages } = await loadedBy(["--redis", redis.url], "redis");
    expect(packages.has("ioredis")).toBe(true);
    expect(builtins.filter((m) => m.includes("undici"))).toEqual([]);
  });
});
