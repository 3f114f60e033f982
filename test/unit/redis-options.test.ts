// Redis connection options: URL parts, credentials from env or file, TLS trust; never a leaked secret.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { Secret } from "../../src/core/secret.js";
import { redactUrl, REDIS_DEFAULT_PORT, redisConnectionOptions, RedisOptionsError } from "../../src/store/redis-options.js";

const tmp = (name: string, text: string) => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sluice-redis-opts-")), name);
  fs.writeFileSync(file, text);
  return file;
};

describe("redisConnectionOptions", () => {
  it("host, port and db from the URL; no TLS for redis://", () => {
    expect(redisConnectionOptions("redis://10.1.2.3:7000/4")).toEqual({ host: "10.1.2.3", port: 7000, db: 4 });
    expect(redisConnectionOptions("redis://cache")).toEqual({ host: "cache", port: REDIS_DEFAULT_PORT, db: 0 });
    expect(redisConnectionOptions("redis://[::1]:7001")).toEqual({ host: "::1", port: 7001, db: 0 });
  });

  it("user and password in the URL work (percent-decoded)", () => {
    expect(redisConnectionOptions("redis://app:p%40ss@h:1")).toMatchObject({ username: "app", password: "p@ss" });
    expect(redisConnectionOptions("redis://:only@h:1")).toMatchObject({ password: "only" });
    expect(redisConnectionOptions("redis://:only@h:1").username).toBeUndefined();
  });

  it("a password from the environment or a file wins over the URL's; the file's trailing newline is dropped", () => {
    expect(redisConnectionOptions("redis://:url@h:1", { password: new Secret("env") }).password).toBe("env");
    const file = tmp("pw", "from file\n");
    expect(redisConnectionOptions("redis://:url@h:1", { passwordFile: file, username: "acl" })).toMatchObject({
      username: "acl",
      password: "from file",
    });
  });

  it("an unreadable or empty password file is an error naming the file, not a secret", () => {
    expect(() => redisConnectionOptions("redis://h:1", { passwordFile: "/nonexistent/pw" })).toThrow(
      new RedisOptionsError("cannot read Redis password file /nonexistent/pw: ENOENT"),
    );
    const empty = tmp("empty", "\n");
    expect(() => redisConnectionOptions("redis://h:1", { passwordFile: empty })).toThrow(/is empty/);
  });

  it("rediss:// verifies the server certificate, with SNI for names and an optional CA file", () => {
    expect(redisConnectionOptions("rediss://redis.internal:6380").tls).toEqual({ rejectUnauthorized: true, servername: "redis.internal" });
    const ca = tmp("ca.pem", "-----BEGIN CERTIFICATE-----\n");
    const o = redisConnectionOptions("rediss://127.0.0.1:6380", { tlsCaFile: ca });
    expect(o.tls).toEqual({ rejectUnauthorized: true, ca: Buffer.from("-----BEGIN CERTIFICATE-----\n") });
  });

  it("a TLS CA with a plain redis:// URL is refused (it would be silently ignored)", () => {
    expect(() => redisConnectionOptions("redis://h:1", { tlsCaFile: "/x" })).toThrow(/not rediss:\/\//);
  });

  it("bad URLs are refused without echoing a password", () => {
    expect(() => redisConnectionOptions("redis://:hunter2@h:1/db")).toThrow("Redis database must be a number, got 'db'");
    expect(() => redisConnectionOptions("http://h:1")).toThrow(/redis:\/\/ or rediss:\/\//);
  });
});

describe("secrets stay secret", () => {
  it("a Secret prints as [redacted] every way", () => {
    const s = { auth: { password: new Secret("hunter2") } };
    expect(JSON.stringify(s)).toBe('{"auth":{"password":"[redacted]"}}');
    expect(inspect(s, { depth: 5 })).not.toContain("hunter2");
    expect(`${s.auth.password}`).toBe("[redacted]");
    expect(s.auth.password.reveal()).toBe("hunter2");
  });

  it("redactUrl hides the password of a URL", () => {
    expect(redactUrl("redis://user:hunter2@h:1/0")).toBe("redis://user:[redacted]@h:1/0");
    expect(redactUrl("rediss://:hunter2@h:1")).toBe("rediss://:[redacted]@h:1");
    expect(redactUrl("redis://h:1")).toBe("redis://h:1");
  });
});
