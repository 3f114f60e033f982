// The one list of Redis commands (src/store/redis-commands.ts) against what sluice sends and what the docs say:
// every command a script calls is on it, and docs/operating.md prints the ACL line it makes, exactly.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { aclSetUserLine, clusterGrants, REDIS_COMMANDS } from "../../src/store/redis-commands.js";
import { ROOT } from "../helpers/sluice.js";

const listed = new Set(REDIS_COMMANDS.map((c) => c.name));

/** Commands named in Lua text: redis.call / redis.pcall / r_call / r_pcall ('NAME', ...). */
function luaCommands(text: string): string[] {
  return [...text.matchAll(/\b(?:redis\.p?call|r_p?call)\('([A-Za-z]+)'/g)].map((m) => m[1].toLowerCase());
}

describe("the Redis commands sluice sends are one list", () => {
  it("holds every command the Lua scripts call (lua/*.lua and the summaries' script)", () => {
    const dir = path.join(ROOT, "lua");
    const called = new Set<string>();
    for (const f of fs.readdirSync(dir)) for (const c of luaCommands(fs.readFileSync(path.join(dir, f), "utf8"))) called.add(c);
    for (const c of luaCommands(fs.readFileSync(path.join(ROOT, "src/store/summaries-redis.ts"), "utf8"))) called.add(c);
    // What the counters and summaries call today; a new command must join the list (and the docs' line).
    expect([...called].sort()).toEqual(
      ["decrby", "del", "expire", "get", "incrby", "pexpireat", "pexpiretime", "pfadd", "set", "time", "zincrby", "zremrangebyrank"].sort(),
    );
    for (const c of called) expect(listed.has(c as never), c).toBe(true);
  });

  it("holds the commands sluice sends itself (connection, scripts, /top's reads, the cluster's map)", () => {
    for (const c of ["info", "ping", "eval", "fcall", "function|load", "evalsha", "script|load", "pfcount", "zunion", "cluster|nodes", "asking"]) {
      expect(listed.has(c as never), c).toBe(true);
    }
  });

  it("is what docs/operating.md prints as the least-privilege user, exactly, with the cluster's additions", () => {
    const page = fs.readFileSync(path.join(ROOT, "docs/operating.md"), "utf8");
    expect(page).toContain("`" + aclSetUserLine() + "`");
    expect(aclSetUserLine()).toBe(
      "ACL SETUSER sluice on >PASSWORD resetkeys ~sluice:* -@all +info +ping +eval +fcall +function|load +evalsha +script|load +time +get +set " +
        "+incrby +decrby +del +pexpireat +pexpiretime +pfadd +zincrby +zremrangebyrank +expire +pfcount +zunion",
    );
    expect(page).toContain("`" + clusterGrants() + "`");
    // No other line grants the sluice user a different set.
    const lines = [...page.matchAll(/ACL SETUSER sluice on[^`]*/g)].map((m) => m[0]);
    expect(lines).toEqual([aclSetUserLine()]);
  });
});
