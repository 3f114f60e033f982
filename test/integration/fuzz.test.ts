// Thousands of malformed calls through a raw HTTP/2 client: every one ends with a gRPC status within
// a deadline, the process stays up, answers normal calls exactly, and its memory comes back.
import net from "node:net";
import zlib from "node:zlib";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Limiter } from "../../src/limiter/limiter.js";
import { loadRuleDir } from "../../src/rules/load.js";
import { startH2Server } from "../../src/server/grpc/h2/server.js";
import { serveSettings } from "../../src/settings/settings.js";
import { MemoryStore } from "../../src/store/memory.js";
import { descriptor, OK, OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { collectGarbage, MiB, rssBytes } from "../helpers/proc.js";
import { grpcCaller, type GrpcCaller, type H2Answer } from "../helpers/h2-call.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";
import { encodeRequest, grpcFrame, lenField, tag, varintField } from "../../bench/lib/frame.mjs";

const RULES = `
domain: f
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
  - key: exact
    rate_limit: {unit: hour, requests_per_unit: 3}
`;

const S = { OK: 0, INVALID_ARGUMENT: 3, RESOURCE_EXHAUSTED: 8, UNIMPLEMENTED: 12, INTERNAL: 13 };
const CAP = 1 << 20; // the default SLUICE_MAX_MESSAGE_BYTES

/** Deterministic: a failure names a case that can be replayed. */
function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = prng(9);
const int = (n: number) => Math.floor(rand() * n);
const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => int(256)));
const valid = (v = "v") => encodeRequest("f", [[["k", v]]]);

interface Case {
  name: string;
  body: Buffer | Buffer[];
  headers?: Record<string, string>;
  path?: string;
  /** Allowed grpc-status values. */
  expect: number[];
  /**
   * Megabyte uploads, sent concurrently on a connection of their own: node's HTTP/2 layer may drop
   * that whole connection (ENHANCE_YOUR_CALM: it buffered too much for it), which is allowed too.
   */
  heavy?: boolean;
  message?: RegExp;
}

function cases(): Case[] {
  const out: Case[] = [];
  for (let i = 0; i < 2000; i++) {
    out.push({ name: `random body ${i}`, body: grpcFrame(bytes(1 + int(300))), expect: [S.OK, S.INVALID_ARGUMENT] });
  }
  for (let i = 0; i < 400; i++) {
    const b = Buffer.from(valid(`flip${i}`));
    for (let j = 0; j < 1 + int(3); j++) b[int(b.length)] ^= 1 << int(8);
    out.push({ name: `bit flips ${i}`, body: grpcFrame(b), expect: [S.OK, S.INVALID_ARGUMENT] });
  }
  for (let i = 0; i < 300; i++) {
    const full = grpcFrame(valid());
    out.push({
      name: `truncated frame ${i}`,
      body: full.subarray(0, int(full.length - 1)),
      expect: [S.UNIMPLEMENTED],
      message: /Received no request message/,
    });
  }
  for (let i = 0; i < 200; i++) {
    const m = valid();
    out.push({ name: `length prefix past the body ${i}`, body: grpcFrame(m, { length: m.length + 1 + int(CAP - m.length) }), expect: [S.UNIMPLEMENTED] });
  }
  for (let i = 0; i < 50; i++) {
    out.push({ name: `length prefix over the cap ${i}`, body: grpcFrame(bytes(20), { length: CAP + 1 + int(2 ** 31) }), expect: [S.RESOURCE_EXHAUSTED] });
  }
  // Only identity is accepted (test/conformance/protocol.test.ts): compressed messages are refused unread.
  for (let i = 0; i < 100; i++) {
    out.push({
      name: `compressed flag, no grpc-encoding ${i}`,
      body: grpcFrame(valid(), { compressed: true }),
      expect: [S.INTERNAL],
      message: /Received a compressed message, but the call's grpc-encoding is identity/,
    });
    out.push({
      name: `gzip flag over junk ${i}`,
      body: grpcFrame(bytes(50), { compressed: true }),
      headers: { "grpc-encoding": "gzip" },
      expect: [S.UNIMPLEMENTED],
      message: /grpc-encoding gzip is not supported/,
    });
  }
  const bomb = zlib.gzipSync(Buffer.alloc(8 * CAP)); // 8 MiB of zeros in ~8 KB
  for (let i = 0; i < 5; i++) {
    out.push({
      name: `gzip bomb ${i}`,
      body: grpcFrame(bomb, { compressed: true }),
      headers: { "grpc-encoding": "gzip" },
      expect: [S.UNIMPLEMENTED],
      message: /grpc-encoding gzip is not supported/,
    });
  }
  const wrongTypes: [string, Buffer][] = [
    ["domain as varint", varintField(1, 7)],
    ["descriptors as varint", Buffer.concat([lenField(1, "f"), varintField(2, 1)])],
    ["hits_addend as bytes", Buffer.concat([valid(), lenField(3, "many")])],
    ["entry key as varint", Buffer.concat([lenField(1, "f"), lenField(2, lenField(1, varintField(1, 1)))])],
    ["override unit as bytes", Buffer.concat([lenField(1, "f"), lenField(2, lenField(2, lenField(2, "SECOND")))])],
    ["hits_addend value as fixed64", Buffer.concat([lenField(1, "f"), lenField(2, lenField(3, Buffer.concat([tag(1, 1), Buffer.alloc(8)])))])],
  ];
  for (let i = 0; i < 300; i++) {
    const [name, body] = wrongTypes[i % wrongTypes.length];
    out.push({ name: `wrong wire type: ${name}`, body: grpcFrame(body), expect: [S.INVALID_ARGUMENT], message: /has wire type \d, expected \d/ });
  }
  for (let i = 0; i < 200; i++) {
    const bad = Buffer.from([0x80 + int(0x40), 0xc0 + int(0x3f), 0xff, 0xfe].slice(0, 1 + int(4)));
    out.push({ name: `invalid UTF-8 ${i}`, body: grpcFrame(encodeRequest("f", [[["k", Buffer.concat([Buffer.from("x"), bad])]]])), expect: [S.OK] });
  }
  let nested = lenField(15, "core");
  for (let d = 0; d < 2000; d++) nested = lenField(15, nested);
  for (let i = 0; i < 20; i++) {
    out.push({ name: `2000-deep nested unknown field ${i}`, body: grpcFrame(Buffer.concat([valid(), nested])), expect: [S.OK] });
    out.push({
      name: `deeply nested groups ${i}`,
      body: grpcFrame(Buffer.concat([valid(), Buffer.alloc(50_000, 0x23)])),
      expect: [S.INVALID_ARGUMENT],
      message: /wire type 3/,
    });
  }
  const manyDescriptors = manyDescriptorsBody();
  const manyEntries = Buffer.concat([lenField(1, "f"), lenField(2, Buffer.alloc(CAP - 20, Buffer.from([0x0a, 0x00])))]);
  for (let i = 0; i < 10; i++) {
    out.push({
      name: `~500k descriptors within the cap ${i}`,
      body: grpcFrame(manyDescriptors),
      expect: [S.INVALID_ARGUMENT],
      message: /more than the maximum 64/,
      heavy: true,
    });
    out.push({
      name: `~500k entries within the cap ${i}`,
      body: grpcFrame(manyEntries),
      expect: [S.INVALID_ARGUMENT],
      message: /more than the maximum 32/,
      heavy: true,
    });
    out.push({
      name: `repeated field above the cap ${i}`,
      body: grpcFrame(Buffer.concat([manyDescriptors, Buffer.alloc(100, 0x12)])),
      expect: [S.RESOURCE_EXHAUSTED],
      heavy: true,
    });
  }
  for (let i = 0; i < 50; i++) {
    out.push({ name: `two messages in a unary call ${i}`, body: [grpcFrame(valid()), grpcFrame(valid())], expect: [S.UNIMPLEMENTED] });
    out.push({ name: `unknown method ${i}`, body: grpcFrame(valid()), path: `/envoy.service.ratelimit.v3.RateLimitService/X${i}`, expect: [S.UNIMPLEMENTED] });
    out.push({ name: `empty body ${i}`, body: Buffer.alloc(0), expect: [S.UNIMPLEMENTED] });
  }
  return out;
}

let sluice: SluiceProcess;
let client: RlsClient;
let raw: GrpcCaller;

beforeAll(async () => {
  sluice = await startSluice(["--config", ruleDir({ "rules.yaml": RULES })]);
  client = rlsClient(sluice.port);
  raw = grpcCaller(sluice.port);
});
afterAll(async () => {
  client?.close();
  await raw?.close();
  expect(await sluice?.stop()).toBe(0);
});

describe("fuzz", () => {
  it("every malformed call ends with the expected gRPC status; then the server is up, exact, and its memory bounded", async () => {
    for (let i = 0; i < 300; i++) await client.shouldRateLimit({ domain: "f", descriptors: [descriptor({ k: `warm${i % 10}` })] });
    const rssBefore = rssBytes(sluice.proc.pid!);
    let rssPeak = rssBefore;

    let calls = 0;
    let dropped = 0;
    const fuzzRound = async () => {
      const r = await runCases(sluice.port, cases(), () => (rssPeak = Math.max(rssPeak, rssBytes(sluice.proc.pid!))));
      calls += r.calls;
      dropped += r.dropped;
      expect({ count: r.wrong.length, first: r.wrong.slice(0, 10) }).toEqual({ count: 0, first: [] });
    };
    const rounds: number[] = [];
    for (let round = 0; round < 2; round++) {
      await fuzzRound();
      rounds.push(rssBytes(sluice.proc.pid!));
    }
    expect(calls).toBeGreaterThanOrEqual(7000);

    // One at a time, an over-size message is always answered (the cap, not a dropped connection).
    const overCap = grpcFrame(Buffer.concat([manyDescriptorsBody(), Buffer.alloc(100, 0x12)]));
    for (let i = 0; i < 5; i++) {
      const r = await raw.call(overCap);
      expect([r.grpcStatus, r.message]).toEqual([S.RESOURCE_EXHAUSTED, `Received message larger than max (${CAP + 99} vs ${CAP})`]);
    }

    // Not gRPC at all: a wrong content-type gets HTTP 415, raw TCP garbage a closed connection.
    const notGrpc = await raw.call(grpcFrame(valid()), { headers: { "content-type": "text/plain" } });
    expect([notGrpc.httpStatus, notGrpc.grpcStatus]).toEqual([415, undefined]);
    for (let i = 0; i < 20; i++) await garbageConnection(sluice.port, bytes(1 + int(4000)));

    expect(sluice.proc.exitCode).toBeNull();
    // Normal calls: exact counting on a fresh counter.
    const codes = [];
    for (let i = 0; i < 4; i++) codes.push((await client.shouldRateLimit({ domain: "f", descriptors: [descriptor({ exact: "after-fuzz" })] })).overall_code);
    expect(codes).toEqual([OK, OK, OK, OVER_LIMIT]);
    const utf8 = await client.shouldRateLimit({ domain: "f", descriptors: [descriptor({ exact: "ünïcödé ✓" })] });
    expect(utf8.statuses[0].limit_remaining).toBe(2);

    // Memory: V8 and malloc keep grown memory while idle, so RSS stays up; it is bounded here, and the
    // next test checks for leaks where a GC can be forced (heap after GC).
    console.log(
      `fuzz: ${calls} calls in 2 rounds (${dropped} heavy ones cut with their connection); sluice RSS before ${mib(rssBefore)}, peak ${mib(rssPeak)}, ` +
        `after each round ${rounds.map(mib).join(" / ")}`,
    );
    expect(Math.max(...rounds)).toBeLessThan(rssBefore + 128 * MiB);
  });

  it("no leak: in one process, the heap after a full GC is where it was before thousands of malformed calls", async () => {
    const rules = loadRuleDir(ruleDir({ "rules.yaml": RULES }), { mergeDomains: false }).rules!;
    const server = await startH2Server(new Limiter(rules, new MemoryStore({})), {
      host: "127.0.0.1",
      port: 0,
      bounds: serveSettings([], {}).bounds,
      maxMessageBytes: CAP,
      logger: pino({ level: "silent" }),
    });
    const heapAfterGc = async () => {
      await sleep(100);
      collectGarbage();
      return process.memoryUsage().heapUsed;
    };
    await runCases(server.port, cases().slice(0, 500));
    const before = await heapAfterGc();
    const heaps: number[] = [];
    for (let round = 0; round < 2; round++) {
      const r = await runCases(server.port, cases());
      expect(r.wrong).toEqual([]);
      heaps.push(await heapAfterGc());
    }
    await server.shutdown(100);
    console.log(`fuzz in-process: heap after GC ${mib(before)} before, ${heaps.map(mib).join(" / ")} after each round`);
    expect(Math.max(...heaps)).toBeLessThan(before + 4 * MiB);
  });

  it("invalid UTF-8 is accepted: each bad sequence reads as U+FFFD, so such values may share a counter", async () => {
    const call = (v: Buffer) => raw.call(grpcFrame(encodeRequest("f", [[["exact", Buffer.concat([Buffer.from("u"), v])]]])));
    const first = await call(Buffer.from([0xff]));
    const second = await call(Buffer.from([0xfe])); // same string after decoding: "u\uFFFD"
    expect([first.grpcStatus, second.grpcStatus]).toEqual([S.OK, S.OK]);
    const answer = await client.shouldRateLimit({ domain: "f", descriptors: [descriptor({ exact: "u\uFFFD" }, { hits_addend: { value: 0 } })] });
    expect(answer.statuses[0].limit_remaining).toBe(1);
  });
});

/** Sends every case (heavy ones concurrently on a connection of their own); lists what went wrong. */
async function runCases(port: number, all: Case[], sample: () => void = () => {}) {
  const results: (H2Answer | undefined)[] = new Array(all.length);
  const run = async (indexes: number[], concurrency: number) => {
    const conn = grpcCaller(port);
    let next = 0;
    const worker = async () => {
      while (next < indexes.length) {
        const i = indexes[next++];
        const c = all[i];
        results[i] = await conn.call(c.body, { path: c.path, headers: c.headers, timeoutMs: 10_000 });
        if (i % 100 === 0) sample();
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    await Promise.race([conn.close(), sleep(1000)]);
  };
  await Promise.all([
    run(
      all.flatMap((c, i) => (c.heavy ? [] : [i])),
      32,
    ),
    run(
      all.flatMap((c, i) => (c.heavy ? [i] : [])),
      10,
    ),
  ]);
  const wrong: string[] = [];
  let dropped = 0;
  for (let i = 0; i < all.length; i++) {
    const c = all[i];
    const r = results[i]!;
    if (c.heavy && r.grpcStatus === undefined && !r.timedOut && /ENHANCE_YOUR_CALM/.test(r.error ?? "")) {
      dropped++;
      continue;
    }
    if (r.timedOut || r.grpcStatus === undefined || !c.expect.includes(r.grpcStatus) || (c.message && !c.message.test(r.message ?? ""))) {
      wrong.push(`#${i} ${c.name}: status ${r.grpcStatus} '${r.message}' timedOut=${r.timedOut} error=${r.error} rst=${r.rstCode}`);
    }
  }
  return { calls: all.length, dropped, wrong };
}

/** CAP - 1 bytes: domain "f" and 524,286 empty descriptors. */
function manyDescriptorsBody(): Buffer {
  return Buffer.concat([lenField(1, "f"), Buffer.alloc(CAP - 4, Buffer.from([0x12, 0x00]))]);
}

const mib = (n: number) => `${(n / MiB).toFixed(1)} MiB`;

function garbageConnection(port: number, data: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => s.write(data));
    const done = () => {
      clearTimeout(timer);
      s.destroy();
      resolve();
    };
    const timer = setTimeout(done, 2000);
    s.on("error", done);
    s.on("close", done);
    s.resume();
  });
}
