// Conformance, real clients: grpc-js (what most gRPC users run) and h2load (nghttp2's load generator,
// a strict HTTP/2 client): unary calls, a client deadline, and 2,000 calls over 4 connections.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { RLS_PATH } from "../helpers/h2-call.js";
import { DOMAIN, GRPC, serve, validCall, type Served } from "./harness.js";
import { track } from "../helpers/children.js";

const H2LOAD = ["/usr/bin/h2load", ...(process.env.PATH ?? "").split(":").map((d) => path.join(d, "h2load"))].find((p) => fs.existsSync(p));

describe("clients", () => {
  describe("grpc-js", () => {
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

    it("unary calls: OK with the limit's figures, then OVER_LIMIT", async () => {
      const call = () => client.shouldRateLimit({ domain: DOMAIN, descriptors: [descriptor({ one: "grpc-js" })] });
      const first = await call();
      expect(first.overall_code).toBe(OK);
      expect(first.statuses).toHaveLength(1);
      expect(first.statuses[0].current_limit).toEqual({ name: "", requests_per_unit: 1, unit: 3 /* HOUR */ });
      expect(first.statuses[0].limit_remaining ?? 0).toBe(0);
      const second = await call();
      expect(second.overall_code).toBe(OVER_LIMIT);
      expect(s.decided).toBe(2);
    });

    it("a client deadline shorter than the store's answer: DEADLINE_EXCEEDED", async () => {
      s.store.hold();
      try {
        const started = performance.now();
        const err = (await client.shouldRateLimit({ domain: DOMAIN, descriptors: [descriptor({ k: "deadline" })] }, 300).then(
          () => undefined,
          (e) => e,
        )) as grpc.ServiceError;
        const ms = performance.now() - started;
        expect(err?.code).toBe(GRPC.DEADLINE_EXCEEDED);
        expect(ms).toBeGreaterThanOrEqual(280);
        expect(ms).toBeLessThan(5300);
        await s.store.whenWaiting(1); // it did reach the store: the deadline, not a refusal, answered
      } finally {
        s.store.release();
      }
    });
  });

  describe("h2load", () => {
    let s: Served;
    beforeAll(async () => {
      s = await serve({ maxConcurrentStreams: 100 });
    });
    afterAll(async () => {
      await s?.stop();
    });

    it("2,000 calls (-n 2000 -c 4 -m 16): every one succeeded with HTTP 2xx and was answered by the server", async () => {
      if (!H2LOAD) {
        throw new Error("h2load not found (/usr/bin/h2load or PATH): install it with `apt-get install nghttp2-client` (.ci/run does)");
      }
      const body = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sluice-h2load-")), "call.bin");
      fs.writeFileSync(body, validCall("h2load"));
      const out = await run(H2LOAD, [
        "-n",
        "2000",
        "-c",
        "4",
        "-m",
        "16",
        "-d",
        body,
        "-H",
        "content-type: application/grpc",
        "-H",
        "te: trailers",
        `http://127.0.0.1:${s.port}${RLS_PATH}`,
      ]);
      expect(out.code, out.text).toBe(0);
      expect(out.text).toMatch(/requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout/);
      expect(out.text).toMatch(/status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx/);
      expect([s.decided, s.failed]).toEqual([2000, []]);
    });
  });
});

function run(cmd: string, args: string[]): Promise<{ code: number | null; text: string }> {
  return new Promise((resolve, reject) => {
    const p = track(spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] }));
    let text = "";
    p.stdout.on("data", (c: Buffer) => (text += c.toString()));
    p.stderr.on("data", (c: Buffer) => (text += c.toString()));
    const timer = setTimeout(() => p.kill("SIGKILL"), 60_000);
    p.on("error", reject);
    p.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, text });
    });
  });
}
