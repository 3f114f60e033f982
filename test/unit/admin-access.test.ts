// The admin port's guard (Host names, the token beyond loopback), its settings, and the sentence a port that
// cannot be had is said in.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { adminGuard, readAdminAccess, type AdminAccess } from "../../src/server/admin/admin-access.js";
import { Secret } from "../../src/core/secret.js";
import { ListenError } from "../../src/server/admin/listen-error.js";
import { UsageError } from "../../src/core/usage-error.js";

const TOKEN = "0123456789abcdef0123";

function guard(access: Partial<AdminAccess> = {}) {
  const g = adminGuard({ allowedHosts: [], ...access });
  return (host: string | undefined, o: { path?: string; peer?: string; authorization?: string } = {}) =>
    g({ host, path: o.path ?? "/top", peer: o.peer ?? "127.0.0.1", authorization: o.authorization })?.status ?? 200;
}

function tokenFile(text: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-token-"));
  fs.writeFileSync(path.join(dir, "token"), text);
  return path.join(dir, "token");
}

describe("the Host names the admin port answers", () => {
  it("localhost and IP literals on any port (no DNS answer points them elsewhere); any other name gets 421", () => {
    const g = guard();
    for (const host of ["127.0.0.1:8080", "localhost:8080", "LOCALHOST:9000", "[::1]:8080", "10.1.2.3:8080", "[fd00::2]:8082", "localhost", "127.0.0.1"]) {
      expect(g(host), host).toBe(200);
    }
    for (const host of ["evil.example", "evil.example:8080", "127.0.0.1.nip.io:8080", "localhost.evil.example", "sluice:8080", "", "[::1", "a b", undefined]) {
      expect(g(host), String(host)).toBe(421);
    }
  });

  it("the operator's names: a bare name on any port, name:port on that port only", () => {
    const g = guard({ allowedHosts: ["sluice", "admin.internal:9000"] });
    expect([g("sluice:8080"), g("SLUICE"), g("admin.internal:9000"), g("admin.internal:9001"), g("evil.example:8080")]).toEqual([200, 200, 200, 421, 421]);
  });

  it("421 comes first, on every route, token or not", () => {
    const g = guard({ token: new Secret(TOKEN) });
    for (const p of ["/healthz", "/readyz", "/metrics", "/rules", "/top", "/ui", "/explain", "/nope"]) {
      expect(g("evil.example", { path: p, authorization: `Bearer ${TOKEN}` }), p).toBe(421);
    }
  });
});

describe("the token", () => {
  it("asked of peers beyond loopback on every route but the probes'; Bearer, any case of the scheme", () => {
    const g = guard({ token: new Secret(TOKEN) });
    const remote = { peer: "192.0.2.9" };
    expect(g("10.0.0.5:8080", remote)).toBe(401);
    expect(g("10.0.0.5:8080", { ...remote, authorization: `Bearer ${TOKEN}x` })).toBe(401);
    expect(g("10.0.0.5:8080", { ...remote, authorization: `Basic ${TOKEN}` })).toBe(401);
    expect(g("10.0.0.5:8080", { ...remote, authorization: TOKEN })).toBe(401);
    expect(g("10.0.0.5:8080", { ...remote, authorization: `Bearer ${TOKEN}` })).toBe(200);
    expect(g("10.0.0.5:8080", { ...remote, authorization: `bearer ${TOKEN}` })).toBe(200);
    expect([g("10.0.0.5:8080", { ...remote, path: "/healthz" }), g("10.0.0.5:8080", { ...remote, path: "/readyz" })]).toEqual([200, 200]);
    // Loopback peers, IPv4-mapped ones included, are trusted as a loopback-only port trusts them.
    for (const peer of ["127.0.0.1", "127.3.4.5", "::1", "::ffff:127.0.0.1"]) expect(g("localhost:8080", { peer }), peer).toBe(200);
    expect(g("localhost:8080", { peer: "::ffff:192.0.2.9" })).toBe(401);
  });

  it("without a token, every peer is answered", () => {
    expect(guard()("10.0.0.5:8080", { peer: "192.0.2.9" })).toBe(200);
  });

  it("the 401 says what to send and names the setting; WWW-Authenticate: Bearer", () => {
    const answer = adminGuard({ token: new Secret(TOKEN), allowedHosts: [] })({ host: "10.0.0.5:8080", path: "/top", peer: "192.0.2.9" });
    expect(answer).toEqual({
      status: 401,
      body: "this admin port asks clients beyond loopback for its token: send Authorization: Bearer <the token in SLUICE_ADMIN_TOKEN_FILE>\n",
      headers: { "www-authenticate": 'Bearer realm="sluice admin"' },
    });
    expect(JSON.stringify(answer)).not.toContain(TOKEN);
  });
});

describe("SLUICE_ADMIN_TOKEN_FILE and SLUICE_ADMIN_ALLOWED_HOSTS", () => {
  it("reads the token's one line; never prints it", () => {
    const access = readAdminAccess({ SLUICE_ADMIN_TOKEN_FILE: tokenFile(`${TOKEN}\n`), SLUICE_ADMIN_ALLOWED_HOSTS: " Sluice , admin.internal:9000,," });
    expect(access.token?.reveal()).toBe(TOKEN);
    expect(access.allowedHosts).toEqual(["sluice", "admin.internal:9000"]);
    expect(JSON.stringify(access)).not.toContain(TOKEN);
    expect(readAdminAccess({})).toEqual({ allowedHosts: [] });
  });

  it("a missing, short or spaced token and a bad host name are usage errors naming the variable", () => {
    const refusal = (env: NodeJS.ProcessEnv) => {
      try {
        readAdminAccess(env);
      } catch (err) {
        expect(err).toBeInstanceOf(UsageError);
        return [(err as UsageError).setting, (err as Error).message];
      }
      return undefined;
    };
    expect(refusal({ SLUICE_ADMIN_TOKEN_FILE: "/nonexistent/token" })).toEqual([
      "SLUICE_ADMIN_TOKEN_FILE",
      "SLUICE_ADMIN_TOKEN_FILE: cannot read /nonexistent/token (ENOENT)",
    ]);
    const short = tokenFile("short\n");
    expect(refusal({ SLUICE_ADMIN_TOKEN_FILE: short })).toEqual([
      "SLUICE_ADMIN_TOKEN_FILE",
      `SLUICE_ADMIN_TOKEN_FILE: ${short} must hold one token of at least 16 characters and no spaces (e.g. \`openssl rand -hex 32\`)`,
    ]);
    expect(refusal({ SLUICE_ADMIN_TOKEN_FILE: tokenFile(`${TOKEN} ${TOKEN}`) })?.[0]).toBe("SLUICE_ADMIN_TOKEN_FILE");
    expect(refusal({ SLUICE_ADMIN_ALLOWED_HOSTS: "ok, http://bad/" })).toEqual([
      "SLUICE_ADMIN_ALLOWED_HOSTS",
      "SLUICE_ADMIN_ALLOWED_HOSTS takes host names or host:port, comma-separated, got 'http://bad/'",
    ]);
  });
});

describe("a port that cannot be had", () => {
  const setting = { what: "the reference's HTTP port (/healthcheck, /json)", port: "PORT", host: "HOST" };
  const error = (code: string) => Object.assign(new Error(`listen ${code}: x`), { code });

  it("says which port, why, and which setting moves it; the system's words only as detail", () => {
    const inUse = new ListenError(error("EADDRINUSE"), "0.0.0.0", 8080, setting);
    expect([inUse.message, inUse.change, inUse.code, inUse.detail.message]).toEqual([
      "cannot listen on 0.0.0.0:8080 for the reference's HTTP port (/healthcheck, /json): another process already listens there; set PORT to a free port (0 picks one)",
      "PORT",
      "EADDRINUSE",
      "listen EADDRINUSE: x",
    ]);
    expect(new ListenError(error("EACCES"), "0.0.0.0", 80, setting).message).toBe(
      "cannot listen on 0.0.0.0:80 for the reference's HTTP port (/healthcheck, /json): this user may not listen there (ports below 1024 need privileges); set PORT to a port above 1023",
    );
    const notHere = new ListenError(error("EADDRNOTAVAIL"), "fd00::9", 8080, setting);
    expect([notHere.message, notHere.change]).toEqual([
      "cannot listen on [fd00::9]:8080 for the reference's HTTP port (/healthcheck, /json): the address is not one of this host's; set HOST to one of its addresses (0.0.0.0 for all)",
      "HOST",
    ]);
  });
});
