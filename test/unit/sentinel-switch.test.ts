import { describe, expect, it } from "vitest";
import { isEndpoint, parseSwitch } from "../../src/store/sentinel-switch.js";

describe("+switch-master messages", () => {
  it("names the new master of the watched name only", () => {
    expect(parseSwitch("mymaster 10.0.0.1 7001 10.0.0.2 6380", "mymaster")).toEqual({ host: "10.0.0.2", port: 6380 });
    expect(parseSwitch("other 10.0.0.1 7001 10.0.0.2 6380", "mymaster")).toBeUndefined();
    expect(parseSwitch("mymaster 10.0.0.1 7001 10.0.0.2", "mymaster")).toBeUndefined();
    expect(parseSwitch("mymaster 10.0.0.1 7001 10.0.0.2 0", "mymaster")).toBeUndefined();
    expect(parseSwitch("mymaster 10.0.0.1 7001 10.0.0.2 65536", "mymaster")).toBeUndefined();
    expect(parseSwitch("mymaster 10.0.0.1 7001 redis-1.redis 7001", "mymaster")).toEqual({ host: "redis-1.redis", port: 7001 });
  });

  it("compares a connection's peer by address, or by port where the sentinels announce hostnames", () => {
    const to = { host: "10.0.0.2", port: 6380 };
    expect(isEndpoint("10.0.0.2", 6380, to)).toBe(true);
    expect(isEndpoint("::ffff:10.0.0.2", 6380, to)).toBe(true);
    expect(isEndpoint("10.0.0.1", 6380, to)).toBe(false);
    expect(isEndpoint("10.0.0.2", 7001, to)).toBe(false);
    expect(isEndpoint(undefined, undefined, to)).toBe(false);
    expect(isEndpoint("FE80::1", 7000, { host: "fe80::1", port: 7000 })).toBe(true);
    expect(isEndpoint("10.0.0.9", 7001, { host: "redis-1.redis", port: 7001 })).toBe(true);
    expect(isEndpoint("10.0.0.9", 6380, { host: "redis-1.redis", port: 7001 })).toBe(false);
  });
});
