// Flags + environment -> one validated Settings. Flags win over environment variables.
import { parseArgs } from "node:util";
import type { RequestBounds } from "./server/decode.js";

export interface Settings {
  configDir: string;
  /** redis://host:port[/db], one per shard; empty = the embedded memory store (single-instance mode). */
  redisUrls: string[];
  port: number;
  host: string;
  mergeDomains: boolean;
  /** Per store call; a slower answer counts as a failure. */
  storeTimeoutMs: number;
  logLevel: string;
  bounds: RequestBounds;
  maxMessageBytes: number;
  shutdownGraceMs: number;
  /** Admin HTTP (health; nothing that changes state). */
  adminPort: number;
  adminHost: string;
  /** Full re-read of the rule directory as a fallback to watching it; 0 = off. */
  reloadIntervalMs: number;
  /** detailed_metric: distinct descriptor values per rule and limit in metric labels, then "_other_". */
  detailedMetricMaxValues: number;
}

export class UsageError extends Error {}

export const SERVE_FLAGS = {
  config: { type: "string" },
  redis: { type: "string" },
  port: { type: "string" },
  host: { type: "string" },
  "merge-domains": { type: "boolean" },
  "admin-port": { type: "string" },
  "admin-host": { type: "string" },
  "log-level": { type: "string" },
} as const;

/** Flags of `sluice check [DIR]`. */
export const CHECK_FLAGS = {
  "merge-domains": { type: "boolean" },
} as const;

/** Flags of `sluice explain`. */
export const EXPLAIN_FLAGS = {
  config: { type: "string" },
  domain: { type: "string" },
  descriptor: { type: "string", multiple: true },
  at: { type: "string" },
  "merge-domains": { type: "boolean" },
} as const;

/** Every command's flags, for usage and for the README's flag table test. */
export const COMMAND_FLAGS: Record<string, Record<string, { type: "string" | "boolean" }>> = {
  serve: SERVE_FLAGS,
  check: CHECK_FLAGS,
  explain: EXPLAIN_FLAGS,
};

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

function logLevel(raw: string | undefined): string {
  if (raw === undefined || raw === "") return "info";
  if (!(LOG_LEVELS as readonly string[]).includes(raw)) {
    throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(", ")}, got '${raw}'`);
  }
  return raw;
}

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
  const redisUrls = (values.redis ?? env.SLUICE_REDIS ?? "").split(",").map((u) => u.trim()).filter((u) => u !== "");
  for (const url of redisUrls) {
    if (!/^rediss?:\/\/[^/]/.test(url) || !URL.canParse(url)) {
      throw new UsageError(`--redis must be a URL like redis://host:port[/db] (several: comma-separated), got '${url}'`);
    }
  }
  if (new Set(redisUrls).size !== redisUrls.length) throw new UsageError("--redis lists the same server twice");
  return {
    configDir: values.config ?? env.SLUICE_CONFIG ?? "config",
    redisUrls,
    port: intSetting("--port", values.port ?? env.SLUICE_PORT, 8081, 0, 65535),
    host: values.host ?? env.SLUICE_HOST ?? "0.0.0.0",
    mergeDomains: values["merge-domains"] ?? boolEnv(env.SLUICE_MERGE_DOMAINS),
    storeTimeoutMs: intSetting("SLUICE_STORE_TIMEOUT_MS", env.SLUICE_STORE_TIMEOUT_MS, 10, 1, 60_000),
    logLevel: logLevel(values["log-level"] ?? env.SLUICE_LOG_LEVEL),
    bounds: { maxDescriptors: 64, maxEntries: 32, maxKeyLength: 1024, maxValueLength: 131_072 },
    maxMessageBytes: 1024 * 1024,
    shutdownGraceMs: intSetting("SLUICE_SHUTDOWN_GRACE_MS", env.SLUICE_SHUTDOWN_GRACE_MS, 5000, 0, 600_000),
    adminPort: intSetting("--admin-port", values["admin-port"] ?? env.SLUICE_ADMIN_PORT, 8080, 0, 65535),
    // Loopback by default: the admin port is for the local machine unless an operator opens it.
    adminHost: values["admin-host"] ?? env.SLUICE_ADMIN_HOST ?? "127.0.0.1",
    reloadIntervalMs: 1000 * intSetting("SLUICE_RELOAD_INTERVAL_S", env.SLUICE_RELOAD_INTERVAL_S, 30, 0, 86_400),
    detailedMetricMaxValues: intSetting("SLUICE_DETAILED_METRIC_MAX_VALUES", env.SLUICE_DETAILED_METRIC_MAX_VALUES, 100, 1, 10_000),
  };
}
