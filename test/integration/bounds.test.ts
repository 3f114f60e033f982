// Every request bound is a setting; at the limit a request passes, one over it is refused with a
// message (INVALID_ARGUMENT; an over-size message gets grpc-js's RESOURCE_EXHAUSTED), never a crash.
import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, rlsClient, type RlsClient, type WireRequest } from "../helpers/grpc-client.js";
import { grpcCaller, type GrpcCaller } from "../helpers/h2-call.js";
import { ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { encodeRequest, grpcFrame, padTo } from "../../bench/lib/frame.mjs";

const RULES = `
domain: b
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
`;

const BOUNDS = {
  SLUICE_MAX_DESCRIPTORS: "3",
  SLUICE_MAX_ENTRIES: "2",
  SLUICE_MAX_KEY_LENGTH: "8",
  SLUICE_MAX_VALUE_LENGTH: "16",
  SLUICE_MAX_MESSAGE_BYTES: "4096",
  SLUICE_MAX_CONCURRENT_STREAMS: "7",
};
const INVALID_ARGUMENT = 3;
const RESOURCE_EXHAUSTED = 8;

let sluice: SluiceProcess;
let client: RlsClient;
let raw: GrpcCaller;

beforeAll(async () => {
  sluice = await startSluice(["--config", ruleDir({ "rules.yaml": RULES })], BOUNDS);
  client = rlsClient(sluice.port);
  raw = grpcCaller(sluice.port);
});
afterAll(async () => {
  client?.close();
  await raw?.close();
  expect(await sluice?.stop()).toBe(0);
});

const refusal = (req: WireRequest) =>
  client.shouldRateLimit(req).then(
    () => undefined,
    (e) => e,
  );
const entries = (n: number): [string, string][] => Array.from({ length: n }, (_, i) => (i === 0 ? ["k", "v"] : [`e${i}`, "v"]));

describe("each bound at its edge", () => {
  it("descriptors per request: 3 pass, 4 are refused", async () => {
    const ok = await client.shouldRateLimit({ domain: "b", descriptors: Array.from({ length: 3 }, () => descriptor({ k: "d" })) });
    expect(ok.statuses.length).toBe(3);
    const err = await refusal({ domain: "b", descriptors: Array.from({ length: 4 }, () => descriptor({ k: "d" })) });
    expect(err?.code).toBe(INVALID_ARGUMENT);
    expect(err?.details).toBe("request has 4 descriptors, more than the maximum 3");
  });

  it("entries per descriptor: 2 pass, 3 are refused", async () => {
    const ok = await client.shouldRateLimit({ domain: "b", descriptors: [descriptor(entries(2))] });
    expect(ok.overall_code).toBe(OK);
    const err = await refusal({ domain: "b", descriptors: [descriptor({ k: "x" }), descriptor(entries(3))] });
    expect(err?.code).toBe(INVALID_ARGUMENT);
    expect(err?.details).toBe("descriptor 1 has 3 entries, more than the maximum 2");
  });

  it("key length: 8 characters pass, 9 are refused", async () => {
    const ok = await client.shouldRateLimit({ domain: "b", descriptors: [descriptor({ ["k".repeat(8)]: "v" })] });
    expect(ok.overall_code).toBe(OK);
    const err = await refusal({ domain: "b", descriptors: [descriptor({ ["k".repeat(9)]: "v" })] });
    expect(err?.code).toBe(INVALID_ARGUMENT);
    expect(err?.details).toBe("descriptor 0 entry 0: key is longer than 8 characters");
  });

  it("value length: 16 characters pass (and count), 17 are refused", async () => {
    const first = await client.shouldRateLimit({ domain: "b", descriptors: [descriptor({ k: "v".repeat(16) })] });
    expect(first.statuses[0].limit_remaining).toBe(999_999);
    const err = await refusal({ domain: "b", descriptors: [descriptor({ k: "v".repeat(17) })] });
    expect(err?.code).toBe(INVALID_ARGUMENT);
    expect(err?.details).toBe("descriptor 0 entry 0: value is longer than 16 characters");
  });

  it("value length counts characters, not bytes: 16 three-byte characters pass", async () => {
    const ok = await client.shouldRateLimit({ domain: "b", descriptors: [descriptor({ k: "€".repeat(16) })] });
    expect(ok.statuses[0].limit_remaining).toBe(999_999);
  });

  it("domain length follows the key bound: 8 pass, 9 are refused", async () => {
    const ok = await client.shouldRateLimit({ domain: "d".repeat(8), descriptors: [descriptor({ k: "v" })] });
    expect(ok.overall_code).toBe(OK);
    const err = await refusal({ domain: "d".repeat(9), descriptors: [descriptor({ k: "v" })] });
    expect(err?.code).toBe(INVALID_ARGUMENT);
    expect(err?.details).toBe("domain is longer than 8 characters");
  });

  it("message size: 4096 bytes pass, 4097 get RESOURCE_EXHAUSTED before the body is read", async () => {
    const base = encodeRequest("b", [[["k", "size"]]]);
    const atLimit = padTo(base, 4096);
    expect(atLimit.length).toBe(4096);
    const ok = await raw.call(grpcFrame(atLimit));
    expect(ok.grpcStatus).toBe(0);
    expect(ok.data.length).toBeGreaterThan(5);

    const over = await raw.call(grpcFrame(padTo(base, 4097)));
    expect(over.grpcStatus).toBe(RESOURCE_EXHAUSTED);
    expect(over.message).toBe("Received message larger than max (4097 vs 4096)");

    // A length prefix of 4 GiB - 1 with no body behind it: refused from the 5-byte header alone.
    const lie = await raw.call(grpcFrame(Buffer.alloc(0), { length: 0xffffffff }));
    expect(lie.grpcStatus).toBe(RESOURCE_EXHAUSTED);
  });

  it("still serves after every refusal", async () => {
    const r = await client.shouldRateLimit({ domain: "b", descriptors: [descriptor({ k: "after" })] });
    expect(r.statuses[0].limit_remaining).toBe(999_999);
    expect(sluice.proc.exitCode).toBeNull();
  });
});

describe("the bounds are validated settings", () => {
  for (const [name, value] of [
    ["SLUICE_MAX_DESCRIPTORS", "0"],
    ["SLUICE_MAX_ENTRIES", "many"],
    ["SLUICE_MAX_KEY_LENGTH", "-1"],
    ["SLUICE_MAX_VALUE_LENGTH", "1.5"],
    ["SLUICE_MAX_MESSAGE_BYTES", "10"],
    ["SLUICE_MEMORY_MAX_KEYS", "0"],
  ]) {
    it(`${name}=${value} is a usage error naming the setting`, () => {
      const r = runCli(["serve", "--port", "0", "--config", ruleDir({ "rules.yaml": RULES })], { [name]: value });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`${name} must be an integer from`);
    });
  }
});

describe("calls in flight per connection", () => {
  it("SLUICE_MAX_CONCURRENT_STREAMS is the HTTP/2 stream limit the server announces", async () => {
    const session = http2.connect(`http://127.0.0.1:${sluice.port}`);
    try {
      const settings = await new Promise<http2.Settings>((resolve, reject) => {
        session.once("remoteSettings", resolve);
        session.once("error", reject);
      });
      expect(settings.maxConcurrentStreams).toBe(7);
    } finally {
      session.close();
    }
  });
});
