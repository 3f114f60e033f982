// gRPC health following the store (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION): SERVING only while every node is up,
// set at once and on each change (never repeated), one log line per change, nothing after the stop.
import pino from "pino";
import { describe, expect, it } from "vitest";
import { servingFollowsStore } from "../../src/server/grpc/grpc-health-store.js";
import type { NodeStatus, StoreStatus } from "../../src/store/store.js";
import { sleep, until } from "../helpers/wait.js";

function setup(states: NodeStatus["state"][]) {
  const status = (): StoreStatus => ({ kind: "redis", nodes: states.map((state, i) => ({ id: `n${i}:7000`, state, inFlight: 0 })) });
  const calls: boolean[] = [];
  const lines: { level: number; msg: string; nodes?: string[] }[] = [];
  const logger = pino({ level: "info" }, { write: (l: string) => lines.push(JSON.parse(l)) });
  const stop = servingFollowsStore(status, (s) => calls.push(s), logger, 5);
  return { calls, lines, stop };
}

describe("servingFollowsStore", () => {
  it("is SERVING at once when every node is up, and says nothing", () => {
    const { calls, lines, stop } = setup(["up", "up"]);
    stop();
    expect(calls).toEqual([true]);
    expect(lines).toEqual([]);
  });

  it("turns NOT_SERVING while a node is down or its circuit open, and SERVING again once all are up", async () => {
    const states: NodeStatus["state"][] = ["up", "up"];
    const { calls, lines, stop } = setup(states);
    states[1] = "down";
    await until(() => calls.length === 2);
    states[1] = "circuit_open";
    await sleep(30); // still not up: no new call
    expect(calls).toEqual([true, false]);
    states[1] = "up";
    await until(() => calls.length === 3);
    stop();
    states[0] = "down";
    await sleep(30);
    expect(calls).toEqual([true, false, true]);
    expect(lines.map((l) => [l.msg, l.nodes])).toEqual([
      ["gRPC health NOT_SERVING: a store node is not up (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION)", ["n1:7000 down"]],
      ["gRPC health SERVING: every store node is up again", undefined],
    ]);
  });

  it("starts NOT_SERVING when the store is down at start", () => {
    const { calls, lines, stop } = setup(["down"]);
    stop();
    expect(calls).toEqual([false]);
    expect(lines).toHaveLength(1);
  });
});
