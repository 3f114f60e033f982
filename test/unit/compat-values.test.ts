// The pieces under the reference's environment: Go's value syntax, the text log format, the runtime
// directory check, the key prefix and unix-socket Redis URLs.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { goDurationMs, goFloat, goInt, goListenAddress, goMap } from "../../src/core/go-values.js";
import { reportReferenceEnv } from "../../src/settings/reference/report.js";
import { filesOnlyTheReferenceLoads } from "../../src/settings/reference/runtime-layout.js";
import { keyPrefixProblem, keyScanPattern, storeKey } from "../../src/core/keys.js";
import { redisConnectionOptions, RedisOptionsError } from "../../src/store/redis-options.js";
import { textLine, textLogDestination } from "../../src/telemetry/text-log.js";
import { Secret } from "../../src/core/secret.js";

describe("Go value syntax", () => {
  it("integers and floats (yes/no: test/unit/settings.yes-no.test.ts)", () => {
    expect(["8080", "-3", "+7", "0x10", "1e3", "1.0", ""].map(goInt)).toEqual([8080, -3, 7, undefined, undefined, undefined, undefined]);
    expect(["0.8", ".5", "1e-1", "abc", "NaN"].map(goFloat)).toEqual([0.8, 0.5, 0.1, undefined, undefined]);
  });

  it("time.ParseDuration in milliseconds", () => {
    expect(["24h", "1h30m", "300ms", "1.5s", "0", "2m0.5s", "1500us", "10"].map(goDurationMs)).toEqual([
      86_400_000,
      5_400_000,
      300,
      1500,
      0,
      120_500,
      1.5,
      undefined,
    ]);
    expect(["-1s", "", "1d", "s", "1h 30m"].map(goDurationMs)).toEqual([undefined, undefined, undefined, undefined, undefined]);
  });

  it("maps and listen addresses", () => {
    expect(goMap("a:1,b:x:y")).toEqual({ a: "1", b: "x:y" });
    expect([goMap(""), goMap("a")]).toEqual([{}, undefined]);
    expect([":9090", "127.0.0.1:9191", "[::1]:80", "9090", "host:99999"].map(goListenAddress)).toEqual([
      { host: "", port: 9090 },
      { host: "127.0.0.1", port: 9191 },
      { host: "::1", port: 80 },
      undefined,
      undefined,
    ]);
  });
});

describe("LOG_FORMAT=text", () => {
  it("rewrites pino's lines in logrus's text layout", () => {
    const lines: string[] = [];
    const logger = pino(
      { level: "info", base: { service: "sluice" }, timestamp: () => ',"time":1796000000000' },
      textLogDestination({ write: (t) => lines.push(t) }),
    );
    logger.info({ port: 8081, dir: "/srv/rules dir", domains: { edge: 5 }, ok: true }, "listening");
    logger.warn({ err: new Error("connect ECONNREFUSED") }, "rate-limit store down");
    logger.debug("not at info");
    expect(lines).toEqual([
      'time="2026-11-30T00:53:20.000Z" level=info msg="listening" service=sluice port=8081 dir="/srv/rules dir" domains="{\\"edge\\":5}" ok=true\n',
      'time="2026-11-30T00:53:20.000Z" level=warning msg="rate-limit store down" service=sluice err="connect ECONNREFUSED"\n',
    ]);
    expect(textLine("not json\n")).toBe("not json");
  });
});

describe("runtime directory: what the reference would load and sluice does not", () => {
  it("nested files, other extensions and dot-files (unless RUNTIME_IGNOREDOTFILES)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-runtime-"));
    for (const f of ["a.yaml", "b.yml", "notes.txt", ".hidden.yaml", "sub/c.yaml", ".git/config", "..2026_12_04/a.yaml"]) {
      fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
      fs.writeFileSync(path.join(dir, f), "domain: x\n");
    }
    fs.symlinkSync("..2026_12_04", path.join(dir, "..data"));
    fs.symlinkSync("..data/a.yaml", path.join(dir, "linked.yaml"));
    expect(filesOnlyTheReferenceLoads(dir, false)).toEqual(["..2026_12_04/a.yaml", ".git/config", ".hidden.yaml", "notes.txt", "sub/c.yaml"]);
    expect(filesOnlyTheReferenceLoads(dir, true)).toEqual(["notes.txt", "sub/c.yaml"]);
    expect(filesOnlyTheReferenceLoads(path.join(dir, "missing"), true)).toEqual([]);

    // At start: one line per variable accepted and not used, one warning naming the skipped files.
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "info", base: undefined, timestamp: false }, { write: (l: string) => lines.push(JSON.parse(l)) });
    reportReferenceEnv(logger, {
      referenceNotes: [
        { variable: "REDIS_POOL_SIZE", reason: "one connection", differs: true },
        { variable: "RUNTIME_WATCH_ROOT", reason: "watched", differs: false },
      ],
      runtimeLayout: { dir, ignoreDotFiles: true },
    });
    const msg = "envoyproxy/ratelimit setting accepted and not used";
    expect(lines.map((l) => ({ ...l, msg: l.msg === msg ? "noted" : String(l.msg).slice(0, 60) }))).toEqual([
      { level: 40, variable: "REDIS_POOL_SIZE", reason: "one connection", msg: "noted" },
      { level: 30, variable: "RUNTIME_WATCH_ROOT", reason: "watched", msg: "noted" },
      { level: 40, dir, files: ["notes.txt", "sub/c.yaml"], count: 2, msg: "envoyproxy/ratelimit would also load these files as rules; s" },
    ]);
  });
});

describe("key prefix", () => {
  it("starts every key, outside the hash tag", () => {
    expect(storeKey("edge:k=v", "fw60", "team-a:")).toBe("team-a:sluice:{edge:k=v}:fw60");
    expect(storeKey("edge:k=v", "fw60")).toBe("sluice:{edge:k=v}:fw60");
  });

  it("what it may hold, and its scan pattern", () => {
    expect(["rl_", "a:b/c.d-e", "x".repeat(128)].map(keyPrefixProblem)).toEqual([undefined, undefined, undefined]);
    expect(["x".repeat(129), "a{b", "a}", "a b", "é"].map(keyPrefixProblem)).toEqual([
      "is longer than 128 characters",
      "must not contain { or } (a Redis Cluster hash tag)",
      "must not contain { or } (a Redis Cluster hash tag)",
      "takes printable ASCII characters without spaces",
      "takes printable ASCII characters without spaces",
    ]);
    expect([keyScanPattern(), keyScanPattern("a*b?[c]\\")]).toEqual(["sluice:*", "a\\*b\\?\\[c\\]\\\\sluice:*"]);
  });
});

describe("unix socket Redis URLs", () => {
  it("unix:///path[?db=N] with credentials from the environment", () => {
    expect(redisConnectionOptions("unix:///run/redis/redis.sock")).toEqual({ path: "/run/redis/redis.sock", db: 0 });
    expect(redisConnectionOptions("unix:///run/my%20redis.sock?db=3", { username: "u", password: new Secret("p") })).toEqual({
      path: "/run/my redis.sock",
      db: 3,
      username: "u",
      password: "p",
    });
    expect(() => redisConnectionOptions("unix://relative.sock")).toThrow(new RedisOptionsError("a unix socket URL takes unix:///absolute/path/to/redis.sock"));
    expect(() => redisConnectionOptions("unix:///r.sock?db=x")).toThrow(new RedisOptionsError("Redis database must be a number, got 'x'"));
    expect(() => redisConnectionOptions("unix:///r.sock", { tlsCaFile: "/ca.pem" })).toThrow(
      new RedisOptionsError("Redis TLS settings were given but the Redis URL is a unix socket"),
    );
  });
});
