// Security settings: documented defaults, environment overrides, TLS and password flag rules.
import { describe, expect, it } from "vitest";
import { serveSettings, UsageError } from "../../src/settings/settings.js";

describe("security settings", () => {
  it("defaults match the bounds table of docs/operating.md", () => {
    const s = serveSettings([], {});
    expect(s.bounds).toEqual({ maxDescriptors: 64, maxEntries: 32, maxKeyLength: 1024, maxValueLength: 131_072 });
    expect(s.maxMessageBytes).toBe(1_048_576);
    expect(s.memoryMaxKeys).toBe(1_000_000);
    expect(s.maxConnections).toBe(4096);
    expect(s.tls).toBeUndefined();
    expect(s.redisAuth).toEqual({});
  });

  it("every bound is an environment setting", () => {
    const s = serveSettings([], {
      SLUICE_MAX_DESCRIPTORS: "5",
      SLUICE_MAX_ENTRIES: "6",
      SLUICE_MAX_KEY_LENGTH: "7",
      SLUICE_MAX_VALUE_LENGTH: "8",
      SLUICE_MAX_MESSAGE_BYTES: "9000",
      SLUICE_MEMORY_MAX_KEYS: "10",
    });
    expect(s.bounds).toEqual({ maxDescriptors: 5, maxEntries: 6, maxKeyLength: 7, maxValueLength: 8 });
    expect(s.maxMessageBytes).toBe(9000);
    expect(s.memoryMaxKeys).toBe(10);
  });

  it("V8's heap growth: 100 % by default, 0 (V8's own) to 300, anything else a usage error naming the variable", () => {
    expect(serveSettings([], {}).heapGrowingPercent).toBe(100);
    expect(serveSettings([], { SLUICE_HEAP_GROWING_PERCENT: "0" }).heapGrowingPercent).toBe(0);
    expect(serveSettings([], { SLUICE_HEAP_GROWING_PERCENT: "50" }).heapGrowingPercent).toBe(50);
    expect(() => serveSettings([], { SLUICE_HEAP_GROWING_PERCENT: "301" })).toThrow(/SLUICE_HEAP_GROWING_PERCENT/);
    expect(() => serveSettings([], { SLUICE_HEAP_GROWING_PERCENT: "fast" })).toThrow(UsageError);
  });

  it("connections per process: --max-connections wins over SLUICE_MAX_CONNECTIONS; 0 is a usage error", () => {
    expect(serveSettings([], { SLUICE_MAX_CONNECTIONS: "100" }).maxConnections).toBe(100);
    expect(serveSettings(["--max-connections", "7"], { SLUICE_MAX_CONNECTIONS: "100" }).maxConnections).toBe(7);
    expect(() => serveSettings([], { SLUICE_MAX_CONNECTIONS: "0" })).toThrow(UsageError);
  });

  it("TLS: flags win over the environment; a CA turns on client certificates", () => {
    const s = serveSettings(["--tls-cert", "c.pem", "--tls-key", "k.pem"], { SLUICE_TLS_CERT: "env.pem", SLUICE_TLS_CA: "ca.pem" });
    expect(s.tls).toEqual({ certFile: "c.pem", keyFile: "k.pem", caFile: "ca.pem", reloadMs: 5000 });
  });

  it("TLS: cert without key, or a CA alone, is a usage error", () => {
    expect(() => serveSettings(["--tls-cert", "c.pem"], {})).toThrow(UsageError);
    expect(() => serveSettings([], { SLUICE_TLS_KEY: "k.pem" })).toThrow("--tls-cert and --tls-key go together");
    expect(() => serveSettings(["--tls-ca", "ca.pem"], {})).toThrow(/needs --tls-cert/);
  });

  it("Redis password: from the environment as a Secret, or a file; not both", () => {
    const s = serveSettings([], { SLUICE_REDIS_PASSWORD: "hunter2", SLUICE_REDIS_USERNAME: "app" });
    expect(s.redisAuth.password?.reveal()).toBe("hunter2");
    expect(s.redisAuth.username).toBe("app");
    expect(JSON.stringify(s)).not.toContain("hunter2");
    expect(serveSettings(["--redis-password-file", "/run/pw"], {}).redisAuth.passwordFile).toBe("/run/pw");
    expect(() => serveSettings(["--redis-password-file", "/run/pw"], { SLUICE_REDIS_PASSWORD: "x" })).toThrow(/not both/);
  });
});
