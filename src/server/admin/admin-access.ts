// Who the admin port answers. Two checks before any route:
// - Host: only names that cannot be DNS-rebound to this port (localhost, IP literals) and the names the
//   operator allows (SLUICE_ADMIN_ALLOWED_HOSTS). A web page the operator visits can make its own name
//   resolve to 127.0.0.1, but its requests still carry that name: they get 421.
// - Token (SLUICE_ADMIN_TOKEN_FILE): asked of every peer beyond loopback, except on the probes' routes.
//   Loopback peers (curl on the host, kubectl port-forward) are trusted as a loopback-only port trusts them.
import { createHash, timingSafeEqual } from "node:crypto";
import fs from "node:fs";
import { isIP } from "node:net";
import { ENV, SETTINGS } from "../../core/settings-table.js";
import { Secret } from "../../core/secret.js";
import { UsageError } from "../../core/usage-error.js";
import type { AdminResponse } from "./admin.js";

export interface AdminAccess {
  /** Bearer token asked of peers beyond loopback (absent: none asked). */
  token?: Secret;
  /** Host names (lower case; `name` or `name:port`) answered besides localhost and IP literals. */
  allowedHosts: string[];
}

/** Routes a probe asks without credentials: they name no client and no rule. */
const OPEN_ROUTES = new Set(["/healthz", "/readyz"]);
/** Shorter tokens are refused at start: a bearer token is the only lock on a port bound beyond loopback. */
const MIN_TOKEN_CHARS = 16;

/** SLUICE_ADMIN_TOKEN_FILE and SLUICE_ADMIN_ALLOWED_HOSTS; a bad value is a usage error naming the variable. */
export function readAdminAccess(env: NodeJS.ProcessEnv): AdminAccess {
  const access: AdminAccess = { allowedHosts: allowedHosts(env[ENV.ADMIN_ALLOWED_HOSTS]) };
  const file = env[ENV.ADMIN_TOKEN_FILE];
  if (file) access.token = new Secret(readToken(file));
  return access;
}

/** The token in `file` (its first line; `sluice top` reads it too). */
export function readToken(file: string): string {
  const name = SETTINGS.ADMIN_TOKEN_FILE.env;
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(`${name}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? "error"})`, name);
  }
  const token = text.replace(/\r?\n$/, "");
  if (token.length < MIN_TOKEN_CHARS || /\s/.test(token)) {
    throw new UsageError(`${name}: ${file} must hold one token of at least ${MIN_TOKEN_CHARS} characters and no spaces (e.g. \`openssl rand -hex 32\`)`, name);
  }
  return token;
}

function allowedHosts(raw: string | undefined): string[] {
  const name = SETTINGS.ADMIN_ALLOWED_HOSTS.env;
  const out: string[] = [];
  for (const item of (raw ?? "").split(",")) {
    const h = item.trim().toLowerCase();
    if (h === "") continue;
    if (!parseHost(h)) throw new UsageError(`${name} takes host names or host:port, comma-separated, got '${item.trim()}'`, name);
    out.push(h);
  }
  return out;
}

/** name[:port] of a Host header (IPv6 in brackets), lower case; undefined if it is not one. */
function parseHost(header: string): { name: string; port?: string } | undefined {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::(\d{1,5}))?$/.exec(header);
  if (!m) return undefined;
  return m[2] === undefined ? { name: m[1] } : { name: m[1], port: m[2] };
}

/** A name no DNS answer can point here: localhost, or an address written out. */
function fixedName(name: string): boolean {
  if (name === "localhost") return true;
  if (name.startsWith("[")) return isIP(name.slice(1, -1)) === 6;
  return isIP(name) === 4;
}

export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  return v4.startsWith("127.") || address === "::1";
}

const digest = (text: string) => createHash("sha256").update(text).digest();

/**
 * The check the admin port runs before its routes: undefined to go on, or the answer (421 for a Host it does not
 * answer to, 401 for a peer beyond loopback without the token).
 */
export function adminGuard(access: AdminAccess): (req: { host?: string; path: string; peer?: string; authorization?: string }) => AdminResponse | undefined {
  const allowed = new Set(access.allowedHosts);
  // Digests of equal length: timingSafeEqual compares in constant time whatever was sent.
  const expected = access.token && digest(access.token.reveal());
  return (req) => {
    const host = parseHost((req.host ?? "").toLowerCase());
    if (!host || !(fixedName(host.name) || allowed.has(host.name) || (host.port !== undefined && allowed.has(`${host.name}:${host.port}`)))) {
      return {
        status: 421,
        body: `this admin port answers only to localhost, IP addresses and the names in ${SETTINGS.ADMIN_ALLOWED_HOSTS.env}; the request's Host is not one of them\n`,
      };
    }
    if (!expected || OPEN_ROUTES.has(req.path) || isLoopback(req.peer)) return undefined;
    const sent = /^bearer +(\S+)$/i.exec(req.authorization ?? "")?.[1];
    if (sent !== undefined && timingSafeEqual(digest(sent), expected)) return undefined;
    return {
      status: 401,
      body: `this admin port asks clients beyond loopback for its token: send Authorization: Bearer <the token in ${SETTINGS.ADMIN_TOKEN_FILE.env}>\n`,
      headers: { "www-authenticate": 'Bearer realm="sluice admin"' },
    };
  };
}
