// sluice's own words for store failures (src/store/failure-words.ts) and the script errors' log and count by kind
// (src/store/script-errors.ts): the library's text only as detail, one line per kind, then one a minute.
import { ReplyError } from "ioredis";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { StoreTimeoutError } from "../../src/store/deadline.js";
import { failureWords, replyKind, storeFailure } from "../../src/store/failure-words.js";
import { ScriptErrorLog, type ScriptErrorKind } from "../../src/store/script-errors.js";

const sysError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe("failure words", () => {
  it("name what failed, and keep the library's or the system's text as detail only", () => {
    const cases: [unknown, string, boolean][] = [
      [sysError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:6380"), "connection refused", true],
      [sysError("ENOTFOUND", "getaddrinfo ENOTFOUND redis.invalid"), "host name not found", true],
      [new Error("Stream isn't writeable and enableOfflineQueue options is false"), "not connected", true],
      [new Error("Connection is closed."), "not connected", true],
      [new Error("All sentinels are unreachable. Retrying from scratch after 50ms. Last error: Connection is closed."), "no sentinel answered", true],
      [new Error("connect ECONNRESET 10.0.0.1:7000"), "connection reset", true],
      [new Error("self-signed certificate in certificate chain"), "TLS handshake failed (certificate not trusted or not valid)", true],
      [new StoreTimeoutError(20), "no reply within 20 ms", false],
      [new ReplyError("WRONGPASS invalid username-password pair or user is disabled."), "authentication failed", false],
      [new ReplyError("OOM command not allowed when used memory > 'maxmemory'."), "the server is out of memory (maxmemory)", false],
      [new ReplyError("NOPERM this user has no permissions to run the 'zunion' command"), "the Redis user may not run zunion", false],
      [
        new ReplyError("NOPERM pexpireat: ERR The user executing the script can't run this command or subcommand script: f, on @user_function:2."),
        "the Redis user may not run pexpireat",
        false,
      ],
      [
        new ReplyError("ERR The user executing the script can't run this command or subcommand script: f, on @user_function:9."),
        "the Redis user may not run a command sluice needs",
        false,
      ],
      [new ReplyError("SOMETHING new"), "Redis answered an error (SOMETHING)", false],
    ];
    for (const [err, reason, unreachable] of cases) {
      const w = failureWords(err);
      expect(w.reason, String(err)).toBe(reason);
      expect(w.unreachable, String(err)).toBe(unreachable);
      expect(w.detail).toBe((err as Error).message);
    }
  });

  it("make the sentence a failed call answers with: the store, then what failed", () => {
    const down = storeFailure("127.0.0.1:6380", "rate-limit script", new Error("Stream isn't writeable and enableOfflineQueue options is false"));
    expect(down.message).toBe("Redis 127.0.0.1:6380 is unreachable (not connected)");
    expect(down.detail).toBe("Stream isn't writeable and enableOfflineQueue options is false");
    const refused = storeFailure(
      "127.0.0.1:6380",
      "rate-limit script",
      new ReplyError("NOPERM pexpireat: ERR The user executing the script can't run this command"),
    );
    expect(refused.message).toBe("Redis 127.0.0.1:6380 refused the rate-limit script: the Redis user may not run pexpireat");
    const slow = storeFailure("127.0.0.1:6380", "PFCOUNT command", new StoreTimeoutError(2000));
    expect(slow.message).toBe("Redis 127.0.0.1:6380 did not answer the PFCOUNT command (no reply within 2000 ms)");
  });

  it("tell an ACL refusal by either form Redis gives it, and name the command where it is named", () => {
    expect(replyKind("NOPERM this user has no permissions to run the 'function|load' command")).toEqual({ code: "NOPERM", command: "function|load" });
    expect(replyKind("ERR The user executing the script can't run this command or subcommand script: x")).toEqual({ code: "NOPERM", command: undefined });
    expect(replyKind("BUSY Redis is busy running a script.")).toEqual({ code: "BUSY", command: undefined });
    expect(replyKind("weird")).toEqual({ code: "ERR", command: undefined });
  });
});

/** A logger that records what it logs, and a clock the test moves. */
function harness() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  const kinds: ScriptErrorKind[] = [];
  let now = 0;
  const log = new ScriptErrorLog(
    logger,
    "127.0.0.1:6380",
    (_node, k) => kinds.push(k),
    () => now,
  );
  return { lines, kinds, log, advance: (ms: number) => (now += ms) };
}

describe("script errors by kind", () => {
  it("are all counted, and logged once per kind, then at most once a minute with how many were left out", () => {
    const h = harness();
    const oom = "OOM command not allowed when used memory > 'maxmemory'.";
    for (let i = 0; i < 5; i++) h.log.report("rate-limit script", oom, undefined, "answered by failure_mode");
    h.log.report("rate-limit script", "BUSY Redis is busy running a script.", undefined, "answered by failure_mode");
    expect(h.kinds).toHaveLength(6);
    expect(h.kinds[0]).toEqual({ code: "OOM", command: "unknown" });
    expect(h.lines.map((l) => [l.msg, l.code, l.reason])).toEqual([
      ["Redis refused a command sluice sent", "OOM", "the server is out of memory (maxmemory)"],
      ["Redis refused a command sluice sent", "BUSY", "the server is busy running a script"],
    ]);
    expect(h.lines[0]).toMatchObject({ store: "127.0.0.1:6380", call: "rate-limit script", outcome: "answered by failure_mode", detail: oom });
    h.advance(59_000);
    h.log.report("rate-limit script", oom, undefined, "x");
    expect(h.lines).toHaveLength(2);
    h.advance(1_000);
    h.log.report("rate-limit script", oom, undefined, "x");
    expect(h.lines).toHaveLength(3);
    expect(h.lines[2]).toMatchObject({ code: "OOM", alsoSince: 5 });
  });

  it("an ACL refusal the permission check named is counted under its command and not logged again", () => {
    const h = harness();
    const unnamed = "ERR The user executing the script can't run this command or subcommand script: f, on @user_function:2.";
    h.log.report("rate-limit script", unnamed, ["time"], "x");
    h.log.report("rate-limit script", "NOPERM pexpireat: " + unnamed, ["pexpireat"], "x");
    expect(h.kinds).toEqual([
      { code: "NOPERM", command: "time" },
      { code: "NOPERM", command: "pexpireat" },
    ]);
    expect(h.lines).toEqual([]);
    // Not foreseen by the check: logged, naming the command.
    h.log.report("EVAL command", "NOPERM zincrby: " + unnamed, undefined, "summaries left out");
    expect(h.lines.map((l) => [l.command, l.code, l.reason])).toEqual([["zincrby", "NOPERM", "the Redis user may not run zincrby"]]);
  });
});
