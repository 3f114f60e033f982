// Conformance, grpc.health.v1 (Check and Watch) through the grpc-js client: the server ("") and the
// RLS service are known, anything else is not; Watch sends changes only and ends at shutdown.
import type * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { GRPC, HEALTH, RLS_SERVICE, serve, type Served } from "./harness.js";

/** The statuses one Watch stream received, with a wait for the n-th and for the end. */
function watch(client: RlsClient, service: string) {
  const seen: number[] = [];
  const waiters = new Set<() => void>();
  let ended = false;
  const done = client.watchHealth(service, (status) => {
    seen.push(status);
    for (const w of waiters) w();
  });
  void done.then(() => {
    ended = true;
    for (const w of waiters) w();
  });
  const wait = (what: string, cond: () => boolean) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!cond()) return;
        clearTimeout(timer);
        waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`Watch(${JSON.stringify(service)}): no ${what}; seen ${JSON.stringify(seen)}`));
      }, 10_000);
      waiters.add(check);
      check();
    });
  return {
    seen,
    count: (n: number) => wait(`${n} statuses`, () => seen.length >= n),
    end: () => wait("end of stream", () => ended),
  };
}

describe("grpc.health.v1", () => {
  let s: Served;
  let client: RlsClient;

  beforeAll(async () => {
    s = await serve();
    client = rlsClient(s.port);
  });
  afterAll(async () => {
    client?.close();
    await s?.stop();
  });

  it('Check: "", the RLS service and the reference\'s name `ratelimit` are SERVING; an unknown service is NOT_FOUND', async () => {
    expect(await client.health("")).toBe(HEALTH.SERVING);
    expect(await client.health(RLS_SERVICE)).toBe(HEALTH.SERVING);
    // envoyproxy/ratelimit registers its health as `ratelimit`: probes written for it ask that.
    expect(await client.health("ratelimit")).toBe(HEALTH.SERVING);
    const err = (await client.health("no.such.Service").then(
      () => undefined,
      (e) => e,
    )) as grpc.ServiceError;
    expect([err.code, err.details]).toEqual([GRPC.NOT_FOUND, "unknown service no.such.Service"]);
  });

  it("Watch: SERVING, NOT_SERVING on setServing(false), SERVING again; unknown service: SERVICE_UNKNOWN only; shutdown: NOT_SERVING and the end", async () => {
    const server = watch(client, "");
    const rls = watch(client, RLS_SERVICE);
    const unknown = watch(client, "no.such.Service");
    await Promise.all([server.count(1), rls.count(1), unknown.count(1)]);

    s.transport.setServing(false);
    await Promise.all([server.count(2), rls.count(2)]);
    expect(await client.health("")).toBe(HEALTH.NOT_SERVING);
    s.transport.setServing(false); // no change: nothing sent
    s.transport.setServing(true);
    await Promise.all([server.count(3), rls.count(3)]);
    expect(await client.health(RLS_SERVICE)).toBe(HEALTH.SERVING);

    expect(await s.shutdown(5000)).toBe(true);
    await Promise.all([server.end(), rls.end(), unknown.end()]);
    expect(server.seen).toEqual([HEALTH.SERVING, HEALTH.NOT_SERVING, HEALTH.SERVING, HEALTH.NOT_SERVING]);
    expect(rls.seen).toEqual([HEALTH.SERVING, HEALTH.NOT_SERVING, HEALTH.SERVING, HEALTH.NOT_SERVING]);
    expect(unknown.seen).toEqual([HEALTH.SERVICE_UNKNOWN]);
  });
});
