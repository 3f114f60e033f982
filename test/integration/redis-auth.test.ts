// Redis with a password (requirepass, ACL user) and over TLS (rediss://): the password comes from a
// file or the environment, works, and appears in no log line of sluice.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { certFactory } from "../helpers/certs.js";
import { descriptor, OK, OVER_LIMIT, rlsClient } from "../helpers/grpc-client.js";
import { freePort } from "../helpers/ports.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";

const RULES = `
domain: auth
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 2}
`;
/** Every command sluice needs (docs/operating.md "Security"). */
const SLUICE_COMMANDS = ["fcall", "function|load", "evalsha", "eval", "script|load", "info", "ping", "time", "get", "set", "pexpiretime", "incrby", "decrby"];
const PASSWORD = `pw-${crypto.randomBytes(12).toString("hex")}`;
const rules = ruleDir({ "rules.yaml": RULES });

// Processes a test started, stopped after it even when an assertion failed midway.
const running: { stop(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});
const sluiceWith = async (args: string[], env: Record<string, string> = {}) => {
  // A generous store timeout: these tests count exactly, and a loaded box can be slower than the default.
  const s = await startSluice(["--config", rules, ...args], { SLUICE_STORE_TIMEOUT_MS: "2000", ...env });
  running.push(s);
  return s;
};
const tmpFile = (name: string, text: string) => {
  const file = path.join(fs.mkdtempSync(path.join(fs.realpathSync("/tmp"), "sluice-auth-")), name);
  fs.writeFileSync(file, text, { mode: 0o600 });
  return file;
};

/** Three calls on one counter: OK, OK, OVER_LIMIT means the counts really went through Redis. */
async function countsThroughRedis(s: SluiceProcess, value: string): Promise<void> {
  const client = rlsClient(s.port);
  const codes = [];
  for (let i = 0; i < 3; i++) codes.push((await client.shouldRateLimit({ domain: "auth", descriptors: [descriptor({ k: value })] })).overall_code);
  client.close();
  expect(codes).toEqual([OK, OK, OVER_LIMIT]);
}

/** With the store down, the rule's failure_mode (allow by default) answers: four calls, four OK, none counted. */
async function answeredByPolicy(s: SluiceProcess): Promise<number[]> {
  const client = rlsClient(s.port);
  try {
    const codes = [];
    for (let i = 0; i < 4; i++) codes.push((await client.shouldRateLimit({ domain: "auth", descriptors: [descriptor({ k: "x" })] }, 3000)).overall_code);
    return codes;
  } finally {
    client.close();
  }
}

function expectNoSecret(s: SluiceProcess, secret: string) {
  expect(s.logs.length).toBeGreaterThan(2);
  expect(s.logs.filter((l) => l.includes(secret))).toEqual([]);
}

describe("Redis with requirepass", () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
    // Set after start: the test helper's readiness PING runs without a password.
    await redis.cli("CONFIG", "SET", "requirepass", PASSWORD);
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("password from a file (--redis-password-file): counts, and no log line holds the password", async () => {
    const file = tmpFile("redis-password", `${PASSWORD}\n`);
    const s = await sluiceWith(["--redis", redis.url, "--redis-password-file", file]);
    await countsThroughRedis(s, "file");
    expect(await s.stop()).toBe(0);
    expect(s.logs.some((l) => /rate-limit store up/.test(l))).toBe(true);
    expectNoSecret(s, PASSWORD);
  });

  it("password from SLUICE_REDIS_PASSWORD_FILE and from SLUICE_REDIS_PASSWORD work the same", async () => {
    const file = tmpFile("redis-password", PASSWORD);
    const a = await sluiceWith(["--redis", redis.url], { SLUICE_REDIS_PASSWORD_FILE: file });
    await countsThroughRedis(a, "env-file");
    await a.stop();
    const b = await sluiceWith(["--redis", redis.url], { SLUICE_REDIS_PASSWORD: PASSWORD });
    await countsThroughRedis(b, "env");
    await b.stop();
    expectNoSecret(a, PASSWORD);
    expectNoSecret(b, PASSWORD);
  });

  it("a password inside the URL works and is never logged, not even in the store's name", async () => {
    const url = `redis://:${PASSWORD}@127.0.0.1:${redis.port}`;
    const s = await sluiceWith(["--redis", url]);
    await countsThroughRedis(s, "url");
    await s.stop();
    expectNoSecret(s, PASSWORD);
    const up = JSON.parse(s.logs.find((l) => /rate-limit store up/.test(l))!);
    expect(up.store).toBe(`127.0.0.1:${redis.port}`);
  });

  it("a wrong password: the store is down (logged without either password), calls are answered by the failure policy", async () => {
    const wrong = `wrong-${crypto.randomBytes(8).toString("hex")}`;
    const s = await sluiceWith(["--redis", redis.url], { SLUICE_REDIS_PASSWORD: wrong });
    expect(await answeredByPolicy(s)).toEqual([OK, OK, OK, OK]);
    await s.stop();
    const down = s.logs.find((l) => /rate-limit store down/.test(l));
    expect(down).toBeDefined();
    // In sluice's words; Redis's own text only as the detail.
    expect(JSON.parse(down!).reason).toBe("authentication failed");
    expect(JSON.parse(down!).detail).toMatch(/WRONGPASS|NOAUTH|invalid password/i);
    expectNoSecret(s, wrong);
    expectNoSecret(s, PASSWORD);
  });

  it("no password at all: NOAUTH, the failure policy answers; an unreadable password file is a usage error naming the file", async () => {
    const s = await sluiceWith(["--redis", redis.url]);
    expect(await answeredByPolicy(s)).toEqual([OK, OK, OK, OK]);
    await s.stop();
    const r = runCli(["serve", "--port", "0", "--config", rules, "--redis", redis.url, "--redis-password-file", "/nonexistent/pw"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("cannot read Redis password file /nonexistent/pw: ENOENT");
  });
});

describe("Redis ACL user with the least it needs", () => {
  it("a user limited to sluice's keys and commands works", async () => {
    const redis = await startRedis();
    running.push(redis);
    const userPassword = `acl-${crypto.randomBytes(8).toString("hex")}`;
    // The ACL line of docs/operating.md: sluice's keys, its script and what runs inside it, what ioredis sends on connect.
    await redis.cli("ACL", "SETUSER", "sluice", "on", `>${userPassword}`, "resetkeys", "~sluice:*", "-@all", ...SLUICE_COMMANDS.map((c) => `+${c}`));
    await redis.cli("ACL", "SETUSER", "default", "off");
    const file = tmpFile("pw", userPassword);
    const s = await sluiceWith(["--redis", redis.url, "--redis-password-file", file], { SLUICE_REDIS_USERNAME: "sluice" });
    await countsThroughRedis(s, "acl");
    await s.stop();
    expectNoSecret(s, userPassword);
  });
});

describe("Redis over TLS (rediss://)", () => {
  let redis: RedisProcess;
  let tlsPort: number;
  let caFile: string;
  beforeAll(async () => {
    const certs = certFactory();
    const ca = certs.ca("redis-ca");
    const server = certs.issue(ca, "redis-server", "server");
    caFile = ca.cert;
    tlsPort = await freePort();
    redis = await startRedis({
      args: [
        "--tls-port",
        String(tlsPort),
        "--tls-cert-file",
        server.cert,
        "--tls-key-file",
        server.key,
        "--tls-ca-cert-file",
        ca.cert,
        "--tls-auth-clients",
        "no",
      ],
    });
    await redis.cli("CONFIG", "SET", "requirepass", PASSWORD);
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("with the server's CA (SLUICE_REDIS_TLS_CA) and a password: counts; no log line holds the password", async () => {
    const s = await sluiceWith(["--redis", `rediss://127.0.0.1:${tlsPort}`], {
      SLUICE_REDIS_TLS_CA: caFile,
      SLUICE_REDIS_PASSWORD: PASSWORD,
    });
    await countsThroughRedis(s, "tls");
    await s.stop();
    expectNoSecret(s, PASSWORD);
  });

  it("without that CA the certificate is not trusted: store down, the failure policy answers", async () => {
    const s = await sluiceWith(["--redis", `rediss://127.0.0.1:${tlsPort}`], { SLUICE_REDIS_PASSWORD: PASSWORD });
    expect(await answeredByPolicy(s)).toEqual([OK, OK, OK, OK]);
    await s.stop();
    const down = s.logs.find((l) => /rate-limit store down/.test(l));
    expect(JSON.parse(down!).reason).toMatch(/certificate/i);
    expectNoSecret(s, PASSWORD);
  });
});
