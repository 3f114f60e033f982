// The service logger's error serializer: what an error may put in a log line.
import { describe, expect, it } from "vitest";
import { errorFields, serviceLogger } from "../../src/telemetry/logger.js";

describe("errors in log lines", () => {
  it("keep type, message, stack and code; drop other fields (ioredis's command and its key arguments)", () => {
    const err = Object.assign(new Error("NOSCRIPT No matching script"), {
      code: "NOSCRIPT",
      command: { name: "evalsha", args: ["abc", "1", "sluice:{lv:secret_key=VAL-in-a-key}:fw3600"] },
    });
    const lines: string[] = [];
    serviceLogger("info", "json", { write: (line: string) => lines.push(line) }).error({ err }, "ShouldRateLimit failed");
    const logged = JSON.parse(lines[0]).err;
    expect(Object.keys(logged).sort()).toEqual(["code", "message", "stack", "type"]);
    expect([logged.type, logged.message, logged.code]).toEqual(["Error", "NOSCRIPT No matching script", "NOSCRIPT"]);
    expect(lines[0]).not.toContain("VAL-in-a-key");
    serviceLogger("info", "text", { write: (line: string) => lines.push(line) }).error({ err }, "ShouldRateLimit failed");
    expect(lines[1]).not.toContain("VAL-in-a-key");
  });

  it("leave what is not an Error as it is", () => {
    expect(errorFields("text")).toBe("text");
  });
});
