// The RLQS codec (src/rlqs/wire.ts) against protobufjs reading protos/: reports as Envoy 1.40 writes them
// (repeated usages) and as the newest API text declares them (map<uint64, usage>), and answers read back.
import path from "node:path";
import protobuf from "protobufjs";
import { describe, expect, it } from "vitest";
import { PROTO_DIR } from "../../src/core/proto-dir.js";
import { bucketEntries, bucketText } from "../../src/core/bucket-id.js";
import { decodeUsageReports, encodeResponse, MalformedReport } from "../../src/rlqs/wire.js";

const root = new protobuf.Root();
// google/protobuf/* come bundled with protobufjs; the rest from protos/.
root.resolvePath = (_origin, target) => (target.startsWith("google/protobuf/") || path.isAbsolute(target) ? target : path.join(PROTO_DIR, target));
root.loadSync("envoy/service/rate_limit_quota/v3/rlqs.proto");
const Reports = root.lookupType("envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports");
const Response = root.lookupType("envoy.service.rate_limit_quota.v3.RateLimitQuotaResponse");

describe("RLQS wire", () => {
  it("reads repeated usages (Envoy 1.40) with the bucket id sorted by key", () => {
    const bytes = Buffer.from(
      Reports.encode(
        Reports.fromObject({
          domain: "edge",
          bucketQuotaUsages: [{ bucketId: { bucket: { z: "1", a: "2" } }, timeElapsed: { seconds: 5 }, numRequestsAllowed: 7, numRequestsDenied: 3 }],
        }),
      ).finish(),
    );
    expect(decodeUsageReports(bytes, 10)).toEqual({
      domain: "edge",
      usages: [
        {
          entries: [
            { key: "a", value: "2" },
            { key: "z", value: "1" },
          ],
          allowed: 7,
          denied: 3,
          elapsedMs: 5000,
        },
      ],
    });
  });

  it("reads the map form (key 1: uint64, value 2: the usage) on the same field", () => {
    const usage = root.lookupType("envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports.BucketQuotaUsage");
    const inner = usage.encode(usage.fromObject({ bucketId: { bucket: { name: "api" } }, numRequestsAllowed: 2 })).finish();
    const entry = Buffer.concat([Buffer.from([0x08, 0x2a, 0x12, inner.length]), Buffer.from(inner)]);
    const bytes = Buffer.concat([Buffer.from([0x0a, 4]), Buffer.from("edge"), Buffer.from([0x12, entry.length]), entry]);
    expect(decodeUsageReports(bytes, 10).usages).toEqual([{ entries: [{ key: "name", value: "api" }], allowed: 2, denied: 0, elapsedMs: 0 }]);
  });

  it("refuses more buckets than the bound, a bucket without id and truncated bytes, naming why", () => {
    const two = Buffer.from(
      Reports.encode(Reports.fromObject({ bucketQuotaUsages: [{ bucketId: { bucket: { a: "1" } } }, { bucketId: { bucket: { a: "2" } } }] })).finish(),
    );
    expect(() => decodeUsageReports(two, 1)).toThrow(new MalformedReport("a report names more than 1 buckets"));
    const noId = Buffer.from(Reports.encode(Reports.fromObject({ bucketQuotaUsages: [{ numRequestsAllowed: 1 }] })).finish());
    expect(() => decodeUsageReports(noId, 10)).toThrow(new MalformedReport("a bucket usage has no bucket_id"));
    expect(() => decodeUsageReports(two.subarray(0, two.length - 2), 10)).toThrow(MalformedReport);
  });

  it("writes assignments, blanket rules (ALLOW_ALL written though it is 0) and abandon as protobufjs reads them", () => {
    const entries = bucketEntries([["name", "api"]]);
    const bytes = encodeResponse([
      { entries, kind: "token_bucket", bucket: { maxTokens: 12, tokensPerFill: 12, fillSeconds: 1, fillNanos: 3 }, ttlSeconds: 2 },
      { entries, kind: "blanket", deny: false, ttlSeconds: 5 },
      { entries, kind: "blanket", deny: true, ttlSeconds: 7 },
      { entries, kind: "abandon" },
    ]);
    const got = Response.toObject(Response.decode(bytes), { enums: String, longs: Number, defaults: false, oneofs: true });
    expect(got).toEqual({
      bucketAction: [
        {
          bucketId: { bucket: { name: "api" } },
          bucketAction: "quotaAssignmentAction",
          quotaAssignmentAction: {
            assignmentTimeToLive: { seconds: 2 },
            rateLimitStrategy: {
              strategy: "tokenBucket",
              tokenBucket: { maxTokens: 12, tokensPerFill: { value: 12 }, fillInterval: { seconds: 1, nanos: 3 } },
            },
          },
        },
        {
          bucketId: { bucket: { name: "api" } },
          bucketAction: "quotaAssignmentAction",
          quotaAssignmentAction: { assignmentTimeToLive: { seconds: 5 }, rateLimitStrategy: { strategy: "blanketRule", blanketRule: "ALLOW_ALL" } },
        },
        {
          bucketId: { bucket: { name: "api" } },
          bucketAction: "quotaAssignmentAction",
          quotaAssignmentAction: { assignmentTimeToLive: { seconds: 7 }, rateLimitStrategy: { strategy: "blanketRule", blanketRule: "DENY_ALL" } },
        },
        { bucketId: { bucket: { name: "api" } }, bucketAction: "abandonAction", abandonAction: {} },
      ],
    });
  });

  it("writes a time to live's fraction as nanos, and a requests_per_time_unit strategy", () => {
    const entries = bucketEntries([["name", "api"]]);
    const bytes = encodeResponse([
      { entries, kind: "blanket", deny: false, ttlSeconds: 1.999 },
      { entries, kind: "requests_per_time_unit", requests: 100, unit: "minute", ttlSeconds: 0.5 },
    ]);
    const got = Response.toObject(Response.decode(bytes), { enums: String, longs: Number, defaults: false, oneofs: true });
    expect(got.bucketAction.map((a: any) => a.quotaAssignmentAction)).toEqual([
      { assignmentTimeToLive: { seconds: 1, nanos: 999_000_000 }, rateLimitStrategy: { strategy: "blanketRule", blanketRule: "ALLOW_ALL" } },
      {
        assignmentTimeToLive: { nanos: 500_000_000 },
        rateLimitStrategy: { strategy: "requestsPerTimeUnit", requestsPerTimeUnit: { requestsPerTimeUnit: 100, timeUnit: "MINUTE" } },
      },
    ]);
  });

  it("one text per bucket id whatever the order, with no forgeable separator", () => {
    expect(
      bucketText(
        bucketEntries([
          ["b", "2"],
          ["a", "1"],
        ]),
      ),
    ).toBe(
      bucketText(
        bucketEntries([
          ["a", "1"],
          ["b", "2"],
        ]),
      ),
    );
    expect(bucketText(bucketEntries([["a", '1","b"="2']]))).not.toBe(
      bucketText(
        bucketEntries([
          ["a", "1"],
          ["b", "2"],
        ]),
      ),
    );
  });
});
