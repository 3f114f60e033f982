// sluice's admin port defends itself (real `sluice serve` processes, a real redis-server):
// - a Host name it does not know gets 421 on every route (DNS rebinding), the operator's names are answered;
// - every answer says it is not to be sniffed or framed, /ui carries a policy whose hashes are its own;
// - bound beyond loopback with SLUICE_ADMIN_TOKEN_FILE, peers beyond loopback need the token (not the probes),
//   and without one the start says the routes answer anyone;
// - /top with the store down answers 503 in sluice's words and says so once per outage.
import { createHash } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ROOT, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

const CONFIG = path.join(ROOT, "config");
const TOKEN = "c2x1aWNlLWFkbWluLXRva2VuLTAx";
/** Every route of the admin port (and a path it does not have). */
const ROUTES = ["/healthz", "/readyz", "/metrics", "/rules", "/top", "/ui", "/explain?domain=edge&descriptor=remote_address%3D1.2.3.4", "/nope"];

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** GET with the headers given (Host included: fetch cannot set it), to `address`. */
function get(port: number, urlPath: string, headers: Record<string, string> = {}, address = "127.0.0.1"): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: address, port, path: urlPath, headers, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
  });
}

/** An address of this host that is not loopback: a peer connecting to it is not a loopback peer. */
const OUTSIDE = Object.values(os.networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;

function tokenFile(text: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-admin-token-"));
  const file = path.join(dir, "token");
  fs.writeFileSync(file, text, { mode: 0o600 });
  return file;
}

const running: SluiceProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});
async function sluice(args: string[], env: Record<string, string> = {}): Promise<SluiceProcess> {
  const s = await startSluice(["--config", CONFIG, ...args], env);
  running.push(s);
  return s;
}

describe("Host names", () => {
  it("evil.example gets 421 on every route; localhost, IP addresses and the operator's names are answered", async () => {
    const s = await sluice([], { SLUICE_ADMIN_ALLOWED_HOSTS: "sluice.internal" });
    for (const route of ROUTES) {
      const evil = await get(s.adminPort, route, { host: "evil.example" });
      expect([evil.status, evil.body], route).toEqual([
        421,
        "this admin port answers only to localhost, IP addresses and the names in SLUICE_ADMIN_ALLOWED_HOSTS; the request's Host is not one of them\n",
      ]);
      expect((await get(s.adminPort, route, { host: `evil.example:${s.adminPort}` })).status, route).toBe(421);
      const expected = route === "/nope" ? 404 : 200;
      for (const host of [
        `127.0.0.1:${s.adminPort}`,
        `localhost:${s.adminPort}`,
        "localhost:9999",
        `[::1]:${s.adminPort}`,
        "10.1.2.3:8080",
        "sluice.internal:8080",
      ]) {
        expect((await get(s.adminPort, route, { host })).status, `${host}${route}`).toBe(expected);
      }
    }
  });
});

describe("what every answer says about itself", () => {
  let s: SluiceProcess;
  beforeAll(async () => {
    s = await startSluice(["--config", CONFIG]);
  });
  afterAll(async () => {
    await s?.stop();
  });

  it("nosniff and frame-ancestors 'none' on every route; /ui's policy allows its own style and script, by hash, and nothing else", async () => {
    for (const route of ROUTES) {
      const a = await get(s.adminPort, route);
      expect([a.headers["x-content-type-options"], a.headers["x-frame-options"]], route).toEqual(["nosniff", "DENY"]);
      expect(a.headers["content-security-policy"], route).toMatch(/(^|; )frame-ancestors 'none'(;|$)/);
      if (route !== "/ui") expect(a.headers["content-security-policy"], route).toBe("default-src 'none'; frame-ancestors 'none'");
    }
    const ui = await get(s.adminPort, "/ui");
    const hash = (text: string) => `'sha256-${createHash("sha256").update(text).digest("base64")}'`;
    const script = /<script>([\s\S]*?)<\/script>/.exec(ui.body)![1];
    const style = /<style>([\s\S]*?)<\/style>/.exec(ui.body)![1];
    expect(ui.headers["content-security-policy"]).toBe(
      `default-src 'none'; script-src ${hash(script)}; style-src ${hash(style)}; connect-src 'self'; img-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'`,
    );
    // One script and one style element, no inline handlers or style attributes the policy would block.
    expect([ui.body.match(/<script/g)?.length, ui.body.match(/<style/g)?.length]).toEqual([1, 1]);
    expect(ui.body).not.toMatch(/\sstyle=|\son[a-z]+=/);
  });
});

describe.runIf(OUTSIDE)(`the token, beyond loopback (peers reach the port at ${OUTSIDE})`, () => {
  it("asks peers beyond loopback for it, except on /healthz and /readyz; loopback peers need none; `sluice top` sends it", async () => {
    const file = tokenFile(`${TOKEN}\n`);
    const s = await sluice(["--admin-host", "0.0.0.0"], { SLUICE_ADMIN_TOKEN_FILE: file });
    const outside = (route: string, headers: Record<string, string> = {}) => get(s.adminPort, route, headers, OUTSIDE!);
    for (const route of ["/metrics", "/rules", "/top", "/ui", "/explain?domain=edge&descriptor=remote_address%3D1.2.3.4"]) {
      const refused = await outside(route);
      expect([refused.status, refused.headers["www-authenticate"]], route).toEqual([401, 'Bearer realm="sluice admin"']);
      expect((await outside(route, { authorization: `Bearer ${TOKEN}x` })).status, route).toBe(401);
      expect((await outside(route, { authorization: `Bearer ${TOKEN}` })).status, route).toBe(200);
      expect((await get(s.adminPort, route)).status, route).toBe(200); // from loopback
    }
    for (const route of ["/healthz", "/readyz"]) expect((await outside(route)).status, route).toBe(200);
    // The Host check still comes first.
    expect((await outside("/top", { host: "evil.example", authorization: `Bearer ${TOKEN}` })).status).toBe(421);
    expect(s.logs.join("\n")).not.toContain(TOKEN);
    expect(s.logs.join("\n")).not.toContain("listens beyond loopback");

    const admin = `${OUTSIDE}:${s.adminPort}`;
    const top = runCli(["top", "--once", "--admin", admin], { SLUICE_ADMIN_TOKEN_FILE: file });
    expect([top.code, top.stderr]).toEqual([0, ""]);
    expect(top.stdout).toContain(`sluice top - ${admin} - window 1m`);
    const without = runCli(["top", "--once", "--admin", admin], { SLUICE_ADMIN_TOKEN_FILE: "" });
    expect(without.code).toBe(1);
    expect(without.stderr).toContain(": 401 this admin port asks clients beyond loopback for its token");
  });

  it("without a token, the start says that the routes answer anyone who can reach the port", async () => {
    const s = await sluice(["--admin-host", "0.0.0.0"]);
    const line = await s.waitForLog((l) => l.level === 40 && /listens beyond loopback/.test(l.msg));
    expect(line).toMatchObject({
      adminHost: "0.0.0.0",
      adminPort: s.adminPort,
      routes: ["/metrics", "/rules", "/top", "/ui", "/explain"],
      msg: "the admin port listens beyond loopback without SLUICE_ADMIN_TOKEN_FILE: these routes (who is refused, the rules) answer anyone who can reach it",
    });
    expect((await get(s.adminPort, "/top", {}, OUTSIDE!)).status).toBe(200);
  });
});

describe("SLUICE_ADMIN_TOKEN_FILE that cannot work", () => {
  it("stops the start with exit 2, naming the variable", () => {
    const r = runCli(["serve", "--config", CONFIG, "--port", "0", "--admin-port", "0"], { SLUICE_ADMIN_TOKEN_FILE: tokenFile("short") });
    expect(r.code).toBe(2);
    expect(r.stderr.split("\n")[0]).toMatch(/^sluice: SLUICE_ADMIN_TOKEN_FILE: \S+ must hold one token of at least 16 characters and no spaces/);
  });
});

describe("/top while the store is down", () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("answers 503 in sluice's words (the store's own only as detail), and logs once per outage", async () => {
    const s = await sluice(["--redis", redis.url], { SLUICE_STORE_TIMEOUT_MS: "500" });
    const store = `redis at 127.0.0.1:${redis.port}`;
    expect((await get(s.adminPort, "/top")).status).toBe(200);
    const outageLines = () => s.logs.filter((l) => l.includes("/top cannot read the refusal summaries")).length;
    const error = new RegExp(
      `^/top cannot read the refusal summaries from the store \\(redis at 127\\.0\\.0\\.1:${redis.port}\\): (it is unavailable|it did not answer within 2000 ms|it refused the read); it answers again once the store does$`,
    );

    for (let outage = 1; outage <= 2; outage++) {
      redis.kill();
      for (let i = 0; i < 5; i++) {
        let a: Answer | undefined;
        // The first reads after the kill may still meet the connection the store is closing.
        await until(
          async () => (a = await get(s.adminPort, `/top?n=${i}`)).status === 503,
          10_000,
          () => `/top answered ${a?.status}`,
        );
        const body = JSON.parse(a!.body);
        expect(Object.keys(body)).toEqual(["error", "detail"]);
        expect(body.error).toMatch(error);
        expect(typeof body.detail).toBe("string");
        expect(body.detail.length).toBeGreaterThan(0);
        expect(a!.headers["content-type"]).toBe("application/json");
      }
      // The 503s can come before sluice's log line reaches this process: wait for the line, then count.
      await until(
        () => outageLines() >= outage,
        10_000,
        () => `${outageLines()} outage lines, wanted ${outage}`,
      );
      expect(outageLines()).toBe(outage);
      await redis.restart();
      await until(
        async () => (await get(s.adminPort, "/top")).status === 200,
        15_000,
        () => "/top did not answer 200 after the store came back",
      );
      const againLines = () => s.logs.filter((l) => l.includes("/top reads the refusal summaries from the store again")).length;
      await until(
        () => againLines() >= outage,
        10_000,
        () => `${againLines()} lines saying /top reads again, wanted ${outage}`,
      );
      expect(outageLines()).toBe(outage);
    }
    const lines = s.logs.filter((l) => l.includes("/top"));
    expect(lines.filter((l) => l.includes("reads the refusal summaries from the store again")).length).toBe(2);
    // No handler failure, no stack trace.
    expect(s.logs.join("\n")).not.toMatch(/admin handler failed|internal error|\n\s+at /);
    const warn = JSON.parse(s.logs.find((l) => l.includes("/top cannot read the refusal summaries"))!);
    expect(warn).toMatchObject({ level: 40, store });
    expect(warn.msg).toMatch(/\(said once until then\)$/);
  }, 90_000);
});
