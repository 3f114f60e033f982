// The one host:port reader of settings, and the error that names the setting at fault.
import { describe, expect, it } from "vitest";
import { parseHostPort } from "../../src/core/host-port.js";
import { serveSettings, UsageError } from "../../src/settings/settings.js";

describe("parseHostPort", () => {
  it("reads host:port and [v6]:port, brackets dropped", () => {
    expect(["redis-a.svc:6380", "10.0.0.1:1", "[::1]:65535", "[2001:db8::1]:26380"].map((s) => parseHostPort(s))).toEqual([
      { host: "redis-a.svc", port: 6380 },
      { host: "10.0.0.1", port: 1 },
      { host: "::1", port: 65535 },
      { host: "2001:db8::1", port: 26380 },
    ]);
  });

  it("refuses what is no host:port", () => {
    for (const bad of ["", "host", "host:", ":80", "host:0", "host:65536", "host:123456", "a b:1", "a/b:1", "u@h:1", "::1:6380", "[x]:1"]) {
      expect(parseHostPort(bad), bad).toBeUndefined();
    }
  });

  it("takes an empty host and port 0 only when asked (a Go listen address)", () => {
    expect(parseHostPort(":9090", { emptyHost: true })).toEqual({ host: "", port: 9090 });
    expect(parseHostPort("h:0", { zeroPort: true })).toEqual({ host: "h", port: 0 });
  });
});

describe("UsageError names the setting", () => {
  const settingOf = (argv: string[], env: NodeJS.ProcessEnv) => {
    try {
      serveSettings(argv, env);
    } catch (err) {
      expect(err).toBeInstanceOf(UsageError);
      return (err as UsageError).setting;
    }
    throw new Error("no error");
  };

  it("for flags, SLUICE_* and the reference's variables", () => {
    expect(settingOf(["--port", "x"], {})).toBe("--port");
    expect(settingOf([], { SLUICE_STORE_TIMEOUT_MS: "0" })).toBe("SLUICE_STORE_TIMEOUT_MS");
    expect(settingOf([], { SLUICE_STATSD: "nohost" })).toBe("SLUICE_STATSD");
    expect(settingOf([], { SLUICE_TRACING_SAMPLING_RATE: "2", SLUICE_TRACING: "otlp" })).toBe("SLUICE_TRACING_SAMPLING_RATE");
    expect(settingOf([], { SLUICE_XDS_TLS: "true" })).toBe("SLUICE_XDS_TLS");
    expect(settingOf([], { SLUICE_REDIS_SENTINEL: "m@s" })).toBe("--redis-sentinel");
    expect(settingOf([], { REDIS_TYPE: "nope" })).toBe("REDIS_TYPE");
  });

  it("keeps errors with one message equal (the setting is not an own enumerable field)", () => {
    expect(new UsageError("m", "--port")).toEqual(new UsageError("m"));
  });
});
