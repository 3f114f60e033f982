// --redis-per-second (-cluster, -sentinel) and its SLUICE_REDIS_PER_SECOND_* credentials -> Settings,
// and every setting that cannot work refused with a message naming it.
import { describe, expect, it } from "vitest";
import { serveSettings, UsageError } from "../../src/settings/settings.js";

const MAIN = ["--redis", "redis://main:7379"];

function refusal(argv: string[], env: Record<string, string> = {}): string {
  try {
    serveSettings(argv, env);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error("no usage error");
}

describe("the per-second store", () => {
  it("absent by default; every limit counts in the main store", () => {
    expect(serveSettings(MAIN, {}).redisPerSecond).toBeUndefined();
  });

  it("URLs (shards), a cluster or a sentinel, from flags or SLUICE_* variables", () => {
    expect(serveSettings([...MAIN, "--redis-per-second", "redis://ps1:6380, redis://ps2:6380"], {}).redisPerSecond).toEqual({
      urls: ["redis://ps1:6380", "redis://ps2:6380"],
      cluster: [],
      sentinel: undefined,
      auth: { username: undefined, password: undefined, passwordFile: undefined, tlsCaFile: undefined, tlsCertFile: undefined, tlsKeyFile: undefined },
      sentinelAuth: {},
    });
    expect(serveSettings(MAIN, { SLUICE_REDIS_PER_SECOND_CLUSTER: "c1:7000,[::1]:7001" }).redisPerSecond?.cluster).toEqual([
      { host: "c1", port: 7000 },
      { host: "::1", port: 7001 },
    ]);
    const s = serveSettings(["--redis-sentinel", "m@s:27379", "--redis-per-second-sentinel", "psm@s1:27379,s2:26380"], {
      SLUICE_REDIS_PER_SECOND_SENTINEL_USERNAME: "sadmin",
      SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD: "spw",
    });
    expect([
      s.redisSentinel?.name,
      s.redisSentinelAuth,
      s.redisPerSecond?.sentinel,
      s.redisPerSecond?.sentinelAuth.username,
      s.redisPerSecond?.sentinelAuth.password?.reveal(),
    ]).toEqual([
      "m",
      {},
      {
        name: "psm",
        sentinels: [
          { host: "s1", port: 27379 },
          { host: "s2", port: 26380 },
        ],
      },
      "sadmin",
      "spw",
    ]);
    // The flag wins over its variable.
    expect(serveSettings([...MAIN, "--redis-per-second", "redis://flag:1"], { SLUICE_REDIS_PER_SECOND: "redis://env:1" }).redisPerSecond?.urls).toEqual([
      "redis://flag:1",
    ]);
  });

  it("its credentials are its own: none from the main store's, none given to it", () => {
    const s = serveSettings([...MAIN, "--redis-per-second", "rediss://ps:6380"], {
      SLUICE_REDIS_PASSWORD: "main-pw",
      SLUICE_REDIS_PER_SECOND_USERNAME: "psuser",
      SLUICE_REDIS_PER_SECOND_PASSWORD_FILE: "/run/ps-pw",
      SLUICE_REDIS_PER_SECOND_TLS_CA: "/ps-ca.pem",
      SLUICE_REDIS_PER_SECOND_TLS_CERT: "/ps-c.pem",
      SLUICE_REDIS_PER_SECOND_TLS_KEY: "/ps-k.pem",
    });
    const a = s.redisPerSecond!.auth;
    expect([a.username, a.password, a.passwordFile, a.tlsCaFile, a.tlsCertFile, a.tlsKeyFile]).toEqual([
      "psuser",
      undefined,
      "/run/ps-pw",
      "/ps-ca.pem",
      "/ps-c.pem",
      "/ps-k.pem",
    ]);
    expect([s.redisAuth.password?.reveal(), s.redisAuth.username, s.redisAuth.tlsCaFile]).toEqual(["main-pw", undefined, undefined]);
  });

  it("what cannot work is refused, naming the setting", () => {
    const ps = [...MAIN, "--redis-per-second", "redis://ps:6380"];
    const cases: [string[], Record<string, string>, string][] = [
      [
        ["--redis-per-second", "redis://ps:6380"],
        {},
        "--redis-per-second (or --redis-per-second-cluster, --redis-per-second-sentinel) needs the main Redis store too: --redis, --redis-cluster or --redis-sentinel",
      ],
      [
        [...MAIN, "--redis-per-second", "ps:6380"],
        {},
        "--redis-per-second must be a URL like redis://host:port[/db] or unix:///path/to/redis.sock (several: comma-separated), got 'ps:6380'",
      ],
      [[...MAIN, "--redis-per-second", "redis://a:1,redis://a:1"], {}, "--redis-per-second lists the same server twice"],
      [[...MAIN, "--redis-per-second-cluster", "c1"], {}, "--redis-per-second-cluster takes host:port[,host:port...], got 'c1'"],
      [
        [...MAIN, "--redis-per-second-sentinel", "s1:27379"],
        {},
        "--redis-per-second-sentinel takes MASTER@host:port[,host:port...], got 's1:27379': no '@' after the master's name",
      ],
      [
        [...ps, "--redis-per-second-cluster", "c:1"],
        {},
        "--redis-per-second and --redis-per-second-cluster cannot be used together: give one per-second Redis store",
      ],
      [
        ps,
        { SLUICE_REDIS_PER_SECOND_PASSWORD: "a", SLUICE_REDIS_PER_SECOND_PASSWORD_FILE: "/f" },
        "give the per-second Redis password once: SLUICE_REDIS_PER_SECOND_PASSWORD or SLUICE_REDIS_PER_SECOND_PASSWORD_FILE, not both",
      ],
      [ps, { SLUICE_REDIS_PER_SECOND_TLS_CERT: "/c.pem" }, "SLUICE_REDIS_PER_SECOND_TLS_CERT and SLUICE_REDIS_PER_SECOND_TLS_KEY go together"],
      [
        [...MAIN, "--redis-per-second-sentinel", "m@s:1"],
        { SLUICE_REDIS_PER_SECOND_TLS_CA: "/ca.pem" },
        "SLUICE_REDIS_PER_SECOND_TLS_CA: TLS is not supported with --redis-per-second-sentinel",
      ],
      [ps, { SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD: "x" }, "SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD needs --redis-per-second-sentinel"],
      [
        ps,
        { SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD: "x", SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD_FILE: "/f" },
        "give the per-second Redis Sentinel password once: SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD or SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD_FILE, not both",
      ],
      [
        MAIN,
        { SLUICE_REDIS_PER_SECOND_PASSWORD: "x", SLUICE_REDIS_PER_SECOND_TLS_CA: "/ca.pem" },
        "SLUICE_REDIS_PER_SECOND_PASSWORD and SLUICE_REDIS_PER_SECOND_TLS_CA need --redis-per-second, --redis-per-second-cluster or --redis-per-second-sentinel",
      ],
    ];
    for (const [argv, env, message] of cases) expect(refusal(argv, env)).toBe(message);
    // A password never shows in a message.
    expect(refusal(ps, { SLUICE_REDIS_PER_SECOND_PASSWORD: "s3cret", SLUICE_REDIS_PER_SECOND_PASSWORD_FILE: "/f" })).not.toContain("s3cret");
  });
});
