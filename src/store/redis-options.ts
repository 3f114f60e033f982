// Redis connection options from a URL plus credentials given apart from it (environment or a file),
// so a password never has to sit in a URL, a flag or a log line.
import { UsageError } from "../core/usage-error.js";
import fs from "node:fs";
import net from "node:net";
import type { RedisOptions } from "ioredis";
import type { Secret } from "../core/secret.js";

export interface RedisAuth {
  /** ACL user (Redis 6+); absent = the default user. */
  username?: string;
  password?: Secret;
  /** A file holding the password (one line; a trailing newline is ignored). Re-read at start only. */
  passwordFile?: string;
  /** PEM CA bundle that signs the Redis server's certificate (rediss:// only); absent = the system CAs. */
  tlsCaFile?: string;
  /** PEM client certificate and its key, for a Redis that requires them (rediss:// only). */
  tlsCertFile?: string;
  tlsKeyFile?: string;
}

/** Redis's own default port, for URLs without one. */
export const REDIS_DEFAULT_PORT = 6379;

/** Configuration that cannot work (unreadable file, CA without rediss://); names the file, never a secret. */
/** A Redis setting that cannot work: a settings error like any other (exit 2), raised where the Redis options are read. */
export class RedisOptionsError extends UsageError {}

type RedisConnectionOptions = Pick<RedisOptions, "host" | "port" | "path" | "db" | "username" | "password" | "tls">;

/**
 * redis://[user:password@]host[:port][/db] or rediss://... (TLS, certificate verified) -> ioredis options.
 * A password from `auth` wins over one in the URL.
 */
export function redisConnectionOptions(url: string, auth: RedisAuth = {}): RedisConnectionOptions {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new RedisOptionsError(`Redis URL is not valid: ${redactUrl(url)}`);
  }
  if (u.protocol === "unix:") return unixSocketOptions(u, auth);
  const secure = u.protocol === "rediss:";
  if (!secure && u.protocol !== "redis:") throw new RedisOptionsError(`Redis URL must start with redis:// or rediss:// (unix:// for a socket)`);
  const dbPart = u.pathname.replace(/^\//, "");
  if (dbPart !== "" && !/^\d+$/.test(dbPart)) throw new RedisOptionsError(`Redis database must be a number, got '${dbPart}'`);

  const host = u.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1";
  const out: RedisConnectionOptions = { host, port: u.port ? Number(u.port) : REDIS_DEFAULT_PORT, db: dbPart ? Number(dbPart) : 0 };

  const username = auth.username ?? (u.username ? decodeURIComponent(u.username) : undefined);
  if (username) out.username = username;
  const password = readPassword(auth) ?? (u.password ? decodeURIComponent(u.password) : undefined);
  if (password !== undefined) out.password = password;

  if ((auth.tlsCaFile || auth.tlsCertFile) && !secure) {
    throw new RedisOptionsError(`a Redis TLS ${auth.tlsCaFile ? "CA" : "client certificate"} was given but the Redis URL is not rediss://`);
  }
  if (secure) {
    out.tls = {
      // Certificates are always verified; the name checked is the URL's host (SNI too, unless it is an IP).
      rejectUnauthorized: true,
      ...(net.isIP(host) ? {} : { servername: host }),
      ...(auth.tlsCaFile ? { ca: readFile(auth.tlsCaFile, "Redis TLS CA") } : {}),
      ...(auth.tlsCertFile && auth.tlsKeyFile
        ? { cert: readFile(auth.tlsCertFile, "Redis TLS client certificate"), key: readFile(auth.tlsKeyFile, "Redis TLS client key") }
        : {}),
    };
  }
  return out;
}

/** unix:///path/to/redis.sock[?db=N]: a local socket (the reference's REDIS_SOCKET_TYPE=unix). */
function unixSocketOptions(u: URL, auth: RedisAuth): RedisConnectionOptions {
  if (u.hostname !== "" || u.pathname === "/") throw new RedisOptionsError("a unix socket URL takes unix:///absolute/path/to/redis.sock");
  if (auth.tlsCaFile || auth.tlsCertFile) throw new RedisOptionsError("Redis TLS settings were given but the Redis URL is a unix socket");
  const db = u.searchParams.get("db") ?? "0";
  if (!/^\d+$/.test(db)) throw new RedisOptionsError(`Redis database must be a number, got '${db}'`);
  const out: RedisConnectionOptions = { path: decodeURIComponent(u.pathname), db: Number(db) };
  if (auth.username) out.username = auth.username;
  const password = readPassword(auth);
  if (password !== undefined) out.password = password;
  return out;
}

/** The URL with any password replaced, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/^(\w+:\/\/[^:@/]*:)[^@/]*@/, "$1[redacted]@");
}

/** The password of `auth` (the Secret's, or the file's first line); `what` names the file in errors. */
export function readPassword(auth: RedisAuth, what = "Redis password file"): string | undefined {
  if (auth.password) return auth.password.reveal();
  if (!auth.passwordFile) return undefined;
  const text = readFile(auth.passwordFile, what)
    .toString("utf8")
    .replace(/\r?\n$/, "");
  if (text === "") throw new RedisOptionsError(`${what} ${auth.passwordFile} is empty`);
  return text;
}

function readFile(file: string, what: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new RedisOptionsError(`cannot read ${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
  }
}
