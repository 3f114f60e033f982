// Redis Sentinel settings: sluice's MASTER@host:port form, the reference's MASTERNAME,host:port form,
// credentials for the master and for the sentinels, and the errors an operator gets for each mistake.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { inspect } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { Secret } from "../../src/core/secret.js";
import { serveSettings, UsageError } from "../../src/settings/settings.js";
import { RedisOptionsError } from "../../src/store/redis-options.js";
import { parseReferenceSentinelUrl, parseSentinelSpec, sentinelConnectionOptions } from "../../src/store/redis-sentinel.js";

const dirs: string[] = [];
const tmp = (text: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-sentinel-pw-"));
  dirs.push(dir);
  fs.writeFileSync(path.join(dir, "pw"), text);
  return path.join(dir, "pw");
};
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

describe("parseSentinelSpec (MASTER@host:port[,host:port...])", () => {
  it("names the master and every sentinel, in order; IPv6 in brackets", () => {
    expect(parseSentinelSpec("mymaster@10.0.0.1:27379, sentinel-b.svc:26380,[::1]:26381")).toEqual({
      name: "mymaster",
      sentinels: [
        { host: "10.0.0.1", port: 27379 },
        { host: "sentinel-b.svc", port: 26380 },
        { host: "::1", port: 26381 },
      ],
    });
    expect(parseSentinelSpec("redis-ha_1@s:1")).toEqual({ name: "redis-ha_1", sentinels: [{ host: "s", port: 1 }] });
  });

  it("refuses each malformed part, naming it", () => {
    const bad = (raw: string) => () => parseSentinelSpec(raw);
    expect(bad("10.0.0.1:27379")).toThrow(
      new RedisOptionsError("--redis-sentinel takes MASTER@host:port[,host:port...], got '10.0.0.1:27379': no '@' after the master's name"),
    );
    expect(bad("@s:1")).toThrow("--redis-sentinel takes MASTER@host:port[,host:port...]: the master's name '' is empty or holds a space, ',' or '@'");
    expect(bad("my master@s:1")).toThrow("the master's name 'my master' is empty");
    expect(bad("a,b@s:1")).toThrow("the master's name 'a,b' is empty");
    expect(bad("m@")).toThrow("--redis-sentinel takes MASTER@host:port[,host:port...]: '' is not a sentinel's host:port");
    expect(bad("m@s")).toThrow("'s' is not a sentinel's host:port");
    expect(bad("m@s:0")).toThrow("'s:0' is not a sentinel's host:port");
    expect(bad("m@s:65536")).toThrow("'s:65536' is not a sentinel's host:port");
    expect(bad("m@s:1,,t:2")).toThrow("'' is not a sentinel's host:port");
    expect(bad("m@::1:27379")).toThrow("'::1:27379' is not a sentinel's host:port");
    expect(bad("m@s:1,s:1")).toThrow("--redis-sentinel lists the sentinel s:1 twice");
  });
});

describe("parseReferenceSentinelUrl (the reference's REDIS_URL with REDIS_TYPE=sentinel)", () => {
  it("MASTERNAME,host:port[,host:port...]", () => {
    expect(parseReferenceSentinelUrl("mymaster,10.0.0.1:27379,10.0.0.2:27379")).toEqual({
      name: "mymaster",
      sentinels: [
        { host: "10.0.0.1", port: 27379 },
        { host: "10.0.0.2", port: 27379 },
      ],
    });
  });

  it("errors name the setting and its form", () => {
    expect(() => parseReferenceSentinelUrl("mymaster")).toThrow(
      new RedisOptionsError("REDIS_URL takes MASTERNAME,host:port[,host:port...]: no sentinel given"),
    );
    expect(() => parseReferenceSentinelUrl(",s:1")).toThrow("REDIS_URL takes MASTERNAME,host:port[,host:port...]: the master's name '' is empty");
    expect(() => parseReferenceSentinelUrl("m,s")).toThrow("REDIS_URL takes MASTERNAME,host:port[,host:port...]: 's' is not a sentinel's host:port");
    expect(() => parseReferenceSentinelUrl("m,s:1", "REDIS_PERSECOND_URL")).not.toThrow();
    expect(() => parseReferenceSentinelUrl("m,s", "REDIS_PERSECOND_URL")).toThrow(/^REDIS_PERSECOND_URL takes/);
  });
});

describe("serve settings: --redis-sentinel", () => {
  it("from the flag or SLUICE_REDIS_SENTINEL (the flag wins); absent by default", () => {
    expect(serveSettings([], {}).redisSentinel).toBeUndefined();
    expect(serveSettings([], {}).redisSentinelAuth).toEqual({});
    expect(serveSettings(["--redis-sentinel", "m@s:1"], { SLUICE_REDIS_SENTINEL: "other@t:2" }).redisSentinel).toEqual({
      name: "m",
      sentinels: [{ host: "s", port: 1 }],
    });
    expect(serveSettings([], { SLUICE_REDIS_SENTINEL: "other@t:2" }).redisSentinel).toEqual({ name: "other", sentinels: [{ host: "t", port: 2 }] });
  });

  it("a malformed value is a usage error", () => {
    expect(() => serveSettings(["--redis-sentinel", "s:1"], {})).toThrow(UsageError);
    expect(() => serveSettings([], { SLUICE_REDIS_SENTINEL: "m@s" })).toThrow(
      new UsageError("--redis-sentinel takes MASTER@host:port[,host:port...]: 's' is not a sentinel's host:port"),
    );
  });

  it("is exclusive with --redis and --redis-cluster, naming the two given", () => {
    expect(() => serveSettings(["--redis", "redis://r:1", "--redis-sentinel", "m@s:1"], {})).toThrow(
      new UsageError("--redis and --redis-sentinel cannot be used together: give one Redis store"),
    );
    expect(() => serveSettings(["--redis-sentinel", "m@s:1"], { SLUICE_REDIS_CLUSTER: "c:1" })).toThrow(
      new UsageError("--redis-cluster and --redis-sentinel cannot be used together: give one Redis store"),
    );
    expect(() => serveSettings(["--redis", "redis://r:1", "--redis-cluster", "c:1"], {})).toThrow(
      new UsageError("--redis and --redis-cluster cannot be used together: give one Redis store"),
    );
  });

  it("the master's credentials are --redis's; the sentinels' their own, as Secrets", () => {
    const s = serveSettings(["--redis-sentinel", "m@s:1", "--redis-password-file", "/run/master-pw"], {
      SLUICE_REDIS_USERNAME: "app",
      SLUICE_REDIS_SENTINEL_USERNAME: "watcher",
      SLUICE_REDIS_SENTINEL_PASSWORD: "sentinel-hunter2",
    });
    expect(s.redisAuth).toEqual({ username: "app", passwordFile: "/run/master-pw" });
    expect(s.redisSentinelAuth.username).toBe("watcher");
    expect(s.redisSentinelAuth.password?.reveal()).toBe("sentinel-hunter2");
    expect(JSON.stringify(s)).not.toContain("sentinel-hunter2");
    expect(inspect(s)).not.toContain("sentinel-hunter2");
    expect(serveSettings(["--redis-sentinel", "m@s:1"], { SLUICE_REDIS_SENTINEL_PASSWORD_FILE: "/run/s-pw" }).redisSentinelAuth).toEqual({
      passwordFile: "/run/s-pw",
    });
  });

  it("sentinel credentials: once, and only with --redis-sentinel; no Redis TLS CA with Sentinel", () => {
    expect(() =>
      serveSettings(["--redis-sentinel", "m@s:1"], { SLUICE_REDIS_SENTINEL_PASSWORD: "x", SLUICE_REDIS_SENTINEL_PASSWORD_FILE: "/run/s-pw" }),
    ).toThrow(new UsageError("give the Redis Sentinel password once: SLUICE_REDIS_SENTINEL_PASSWORD or SLUICE_REDIS_SENTINEL_PASSWORD_FILE, not both"));
    expect(() => serveSettings(["--redis", "redis://r:1"], { SLUICE_REDIS_SENTINEL_PASSWORD: "x" })).toThrow(
      new UsageError("SLUICE_REDIS_SENTINEL_PASSWORD needs --redis-sentinel"),
    );
    expect(() => serveSettings([], { SLUICE_REDIS_SENTINEL_USERNAME: "u", SLUICE_REDIS_SENTINEL_PASSWORD_FILE: "/f" })).toThrow(
      new UsageError("SLUICE_REDIS_SENTINEL_USERNAME and SLUICE_REDIS_SENTINEL_PASSWORD_FILE need --redis-sentinel"),
    );
    expect(() => serveSettings(["--redis-sentinel", "m@s:1"], { SLUICE_REDIS_TLS_CA: "/ca.pem" })).toThrow(
      new UsageError("SLUICE_REDIS_TLS_CA: TLS is not supported with --redis-sentinel"),
    );
  });
});

describe("sentinelConnectionOptions", () => {
  const spec = { name: "m", sentinels: [{ host: "s", port: 27379 }] };

  it("names the master and the sentinels; no credentials unless given", () => {
    expect(sentinelConnectionOptions(spec)).toEqual({ sentinels: [{ host: "s", port: 27379 }], name: "m" });
  });

  it("master credentials from a Secret or a file; the sentinels' apart", () => {
    const o = sentinelConnectionOptions(
      spec,
      { username: "app", passwordFile: tmp("master-pw\n") },
      { username: "watcher", password: new Secret("sentinel-pw") },
    );
    expect(o).toEqual({
      sentinels: [{ host: "s", port: 27379 }],
      name: "m",
      username: "app",
      password: "master-pw",
      sentinelUsername: "watcher",
      sentinelPassword: "sentinel-pw",
    });
    expect(sentinelConnectionOptions(spec, { password: new Secret("a") }, { passwordFile: tmp("b") })).toMatchObject({ password: "a", sentinelPassword: "b" });
  });

  it("an unreadable or empty sentinel password file is named, never its content", () => {
    expect(() => sentinelConnectionOptions(spec, {}, { passwordFile: "/nonexistent/pw" })).toThrow(
      new RedisOptionsError("cannot read Redis Sentinel password file /nonexistent/pw: ENOENT"),
    );
    const empty = tmp("\n");
    expect(() => sentinelConnectionOptions(spec, {}, { passwordFile: empty })).toThrow(new RedisOptionsError(`Redis Sentinel password file ${empty} is empty`));
  });
});
