// CLI settings that depend on where sluice runs: the rule directory's settings and the log format.
import { describe, expect, it } from "vitest";
import { defaultAdminAddress, ruleDirSettings, serveSettings, UsageError } from "../../src/settings/settings.js";

describe("log format", () => {
  it("text on a terminal and JSON elsewhere, unless SLUICE_LOG_FORMAT (or the reference's LOG_FORMAT) says", () => {
    expect(serveSettings([], {}, true).logFormat).toBe("text");
    expect(serveSettings([], {}, false).logFormat).toBe("json");
    expect(serveSettings([], { SLUICE_LOG_FORMAT: "json" }, true).logFormat).toBe("json");
    expect(serveSettings([], { LOG_FORMAT: "json" }, true).logFormat).toBe("json");
    expect(serveSettings([], { SLUICE_LOG_FORMAT: "text" }, false).logFormat).toBe("text");
  });
});

describe("rule directory settings, the same for serve, check and explain", () => {
  it("flag > SLUICE_CONFIG > RUNTIME_* > ./config; an empty variable counts as unset", () => {
    expect(ruleDirSettings({}, {}).configDir).toBe("config");
    expect(ruleDirSettings({}, { SLUICE_CONFIG: "" }).configDir).toBe("config");
    expect(ruleDirSettings({}, { RUNTIME_ROOT: "/r", RUNTIME_SUBDIRECTORY: "s" }).configDir).toBe("/r/s/config");
    expect(ruleDirSettings({}, { SLUICE_CONFIG: "/e", RUNTIME_ROOT: "/r" }).configDir).toBe("/e");
    expect(ruleDirSettings({ config: "/f" }, { SLUICE_CONFIG: "/e" }).configDir).toBe("/f");
    expect(serveSettings(["--config", "/f"], { SLUICE_CONFIG: "/e" }).configDir).toBe("/f");
    expect(serveSettings([], { RUNTIME_ROOT: "/r", RUNTIME_SUBDIRECTORY: "s" }).configDir).toBe("/r/s/config");
  });

  it("--allow-empty-rules and SLUICE_ALLOW_EMPTY_RULES; a value that is neither yes nor no is a usage error", () => {
    expect(serveSettings([], {}).allowEmptyRules).toBe(false);
    expect(serveSettings(["--allow-empty-rules"], {}).allowEmptyRules).toBe(true);
    expect(serveSettings([], { SLUICE_ALLOW_EMPTY_RULES: "1" }).allowEmptyRules).toBe(true);
    expect(serveSettings([], { SLUICE_ALLOW_EMPTY_RULES: "false" }).allowEmptyRules).toBe(false);
    expect(ruleDirSettings({}, { SLUICE_ALLOW_EMPTY_RULES: "on" }).allowEmptyRules).toBe(true);
    expect(() => serveSettings([], { SLUICE_ALLOW_EMPTY_RULES: "sure" })).toThrow(UsageError);
  });

  it("MERGE_DOMAIN_CONFIG counts for check and explain as for serve", () => {
    expect(ruleDirSettings({}, { MERGE_DOMAIN_CONFIG: "true" }).mergeDomains).toBe(true);
    expect(ruleDirSettings({ "merge-domains": false }, { SLUICE_MERGE_DOMAINS: "true" }).mergeDomains).toBe(false);
  });
});

describe("sluice top's default admin address", () => {
  it("is where serve listens in the same environment: 8082 under the reference's, SLUICE_ADMIN_* when set, a wildcard reached on loopback", () => {
    expect(defaultAdminAddress({})).toBe("127.0.0.1:8080");
    expect(defaultAdminAddress({ REDIS_URL: "127.0.0.1:16390", RUNTIME_ROOT: "/srv/runtime" })).toBe("127.0.0.1:8082");
    expect(defaultAdminAddress({ RUNTIME_ROOT: "/srv/runtime", SLUICE_ADMIN_PORT: "9901" })).toBe("127.0.0.1:9901");
    expect(defaultAdminAddress({ SLUICE_ADMIN_HOST: "0.0.0.0", SLUICE_ADMIN_PORT: "9000" })).toBe("127.0.0.1:9000");
    expect(defaultAdminAddress({ SLUICE_ADMIN_HOST: "::" })).toBe("[::1]:8080");
    expect(defaultAdminAddress({ SLUICE_ADMIN_HOST: "10.0.0.7", SLUICE_ADMIN_PORT: "9000" })).toBe("10.0.0.7:9000");
  });
});
