// Flags + environment -> one validated Settings. Flags win over environment variables.
import { parseArgs } from "node:util";
import type { RequestBounds } from "./server/decode.js";

export interface Settings {
  configDir: string;
  /** redis://host:port[/db]; absent = the embedded memory store (single-instance mode). */
  redisUrl?: string;
  port: number;
  host: string;
  mergeDomains: boolean;
  /** Per store call; a slower answer counts as a failure. */
  storeTimeoutMs: number;
  logLevel: string;
  bounds: RequestBounds;
  maxMessageBytes: number;
  shutdownGraceMs: number;
  /** Processes serving the port (node:cluster); 1 = this process serves, no cluster. */
  workers: number;
}

export class UsageError extends Error {}

export const SERVE_FLAGS = {
  config: { type: "string" },
  redis: { type: "string" },
  port: { type: "string" },
  host: { type: "string" },
  "merge-domains": { type: "boolean" },
  workers: { type: "string" },
} as const;

function intSetting(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new UsageError(`${name} must be an integer from ${min} to ${max}, got '${raw}'`);
  }
  return n;
}

function boolEnv(raw: string | undefined): boolean {
  return raw !== undefined && /^(1|true|yes|on)$/i.test(raw);
}

export function serveSettings(argv: string[], env: NodeJS.ProcessEnv): Settings {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: SERVE_FLAGS, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const redisUrl = values.redis ?? env.SLUICE_REDIS;
  if (redisUrl !== undefined && redisUrl !== "" && !/^rediss?:\/\//.test(redisUrl)) {
    throw new UsageError(`--redis must be a URL like redis://host:port[/db], got '${redisUrl}'`);
  }
  return {
    configDir: values.config ?? env.SLUICE_CONFIG ?? "config",
    redisUrl: redisUrl || undefined,
    port: intSetting("--port", values.port ?? env.SLUICE_PORT, 8081, 0, 65535),
    host: values.host ?? env.SLUICE_HOST ?? "0.0.0.0",
    mergeDomains: values["merge-domains"] ?? boolEnv(env.SLUICE_MERGE_DOMAINS),
    storeTimeoutMs: intSetting("SLUICE_STORE_TIMEOUT_MS", env.SLUICE_STORE_TIMEOUT_MS, 50, 1, 60_000),
    logLevel: env.SLUICE_LOG_LEVEL ?? "info",
    bounds: { maxDescriptors: 64, maxEntries: 32, maxKeyLength: 1024, maxValueLength: 131_072 },
    maxMessageBytes: 1024 * 1024,
    shutdownGraceMs: 5000,
    workers: intSetting("--workers", values.workers ?? env.SLUICE_WORKERS, 1, 1, 64),
  };
}
