// Flags + environment -> one validated Settings. Flags win over environment variables.
import { parseArgs } from "node:util";
import type { RequestBounds } from "./server/decode.js";
import type { TlsFiles } from "./server/tls.js";
import type { RedisAuth } from "./store/redis-options.js";
import { Secret } from "./secret.js";

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
  /** Memory store only: most counters kept (least recently used go first). */
  memoryMaxKeys: number;
  /** gRPC server TLS; with a CA, client certificates are required (mTLS). Absent = plaintext. */
  tls?: TlsFiles;
  /** Redis credentials and TLS trust; the password is a Secret, never printed. */
  redisAuth: RedisAuth;
}

export class UsageError extends Error {}

export const SERVE_FLAGS = {
  config: { type: "string" },
  redis: { type: "string" },
  port: { type: "string" },
  host: { type: "string" },
  "merge-domains": { type: "boolean" },
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "tls-ca": { type: "string" },
  "redis-password-file": { type: "string" },
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
    ...securitySettings(values, env),
    shutdownGraceMs: 5000,
  };
}

// --- Security: request bounds, memory-store cap, gRPC TLS, Redis credentials (see README "Security").
function securitySettings(values: Record<string, string | boolean | undefined>, env: NodeJS.ProcessEnv) {
  const flag = (name: string) => (typeof values[name] === "string" ? (values[name] as string) : undefined);
  const bounds: RequestBounds = {
    maxDescriptors: intSetting("SLUICE_MAX_DESCRIPTORS", env.SLUICE_MAX_DESCRIPTORS, 64, 1, 10_000),
    maxEntries: intSetting("SLUICE_MAX_ENTRIES", env.SLUICE_MAX_ENTRIES, 32, 1, 10_000),
    maxKeyLength: intSetting("SLUICE_MAX_KEY_LENGTH", env.SLUICE_MAX_KEY_LENGTH, 1024, 1, 1 << 20),
    maxValueLength: intSetting("SLUICE_MAX_VALUE_LENGTH", env.SLUICE_MAX_VALUE_LENGTH, 131_072, 1, 64 << 20),
  };
  const maxMessageBytes = intSetting("SLUICE_MAX_MESSAGE_BYTES", env.SLUICE_MAX_MESSAGE_BYTES, 1 << 20, 64, 64 << 20);
  const memoryMaxKeys = intSetting("SLUICE_MEMORY_MAX_KEYS", env.SLUICE_MEMORY_MAX_KEYS, 1_000_000, 1, 100_000_000);

  const certFile = flag("tls-cert") ?? env.SLUICE_TLS_CERT;
  const keyFile = flag("tls-key") ?? env.SLUICE_TLS_KEY;
  const caFile = flag("tls-ca") ?? env.SLUICE_TLS_CA;
  if (!certFile !== !keyFile) throw new UsageError("--tls-cert and --tls-key go together");
  if (caFile && !certFile) throw new UsageError("--tls-ca (client certificates) needs --tls-cert and --tls-key");
  const tls: TlsFiles | undefined = certFile
    ? {
        certFile,
        keyFile: keyFile!,
        caFile: caFile || undefined,
        reloadMs: intSetting("SLUICE_TLS_RELOAD_MS", env.SLUICE_TLS_RELOAD_MS, 5000, 10, 3_600_000),
      }
    : undefined;

  const passwordFile = flag("redis-password-file") ?? env.SLUICE_REDIS_PASSWORD_FILE;
  const password = env.SLUICE_REDIS_PASSWORD;
  if (passwordFile && password) {
    throw new UsageError("give the Redis password once: SLUICE_REDIS_PASSWORD or --redis-password-file, not both");
  }
  const redisAuth: RedisAuth = {
    username: env.SLUICE_REDIS_USERNAME || undefined,
    password: password ? new Secret(password) : undefined,
    passwordFile: passwordFile || undefined,
    tlsCaFile: env.SLUICE_REDIS_TLS_CA || undefined,
  };
  return { bounds, maxMessageBytes, memoryMaxKeys, tls, redisAuth };
}
