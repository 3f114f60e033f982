// quota_mode and the global modes (the reference's QUOTA_MODE and SHADOW_MODE) as scenarios with exact
// answers and counters, shared by the memory-store unit test and the Redis + gRPC integration test: both
// stores must give the same answers. Time is pinned 10 s into a minute and never advances, so a minute
// window has 50 s left and an hour window 3590 s.
import type { LimiterOptions } from "../../src/limiter/limiter.js";
import type { RuleCounts } from "../../src/telemetry/rule-counters.js";
import type { WireDescriptor, WireResponse } from "./grpc-client.js";

export const QUOTA_MODE_DOMAIN = "qm";

export const QUOTA_MODE_RULES = `
domain: qm
descriptors:
  # The reference's example: two services in quota mode, one request names both.
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: service
    value: service_2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: slow
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: soft
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: free
    rate_limit: {unlimited: true}
`;

/** 2027-06-01T00:00:10Z, in microseconds: in the future, so Redis keeps keys that expire at window ends. */
export const QUOTA_MODE_TIME_US = (Date.parse("2027-06-01T00:00:00Z") + 10_000) * 1000;

type Code = "OK" | "OVER_LIMIT";
/** A descriptor: key, value and optionally its own hits_addend. */
type D = [string, string] | [string, string, number];

export interface Answer {
  code: Code;
  /** Per descriptor: code and limit_remaining. */
  statuses: [Code, number][];
  /** The Retry-After header, absent when the answer has none. */
  retryAfter?: number;
}

export interface Step {
  send: D[];
  expect: Answer;
}

export type Counts = Partial<Pick<RuleCounts, "hits" | "overLimit" | "nearLimit" | "withinLimit" | "shadowMode">>;

export interface Scenario {
  name: string;
  options: Pick<LimiterOptions, "globalShadowMode" | "globalQuotaMode">;
  steps: Step[];
  /** Rule counters after the steps, by rule path. */
  counters: Record<string, Counts>;
  /** How many answers global shadow mode turned to OK. */
  shadowed: number;
}

const U32 = 4294967295;
const ok = (...statuses: [Code, number][]): Answer => ({ code: "OK", statuses });
const over = (retryAfter: number | undefined, ...statuses: [Code, number][]): Answer =>
  retryAfter === undefined ? { code: "OVER_LIMIT", statuses } : { code: "OVER_LIMIT", statuses, retryAfter };
const repeat = (n: number, step: Step): Step[] => Array.from({ length: n }, () => step);

export const QUOTA_MODE_SCENARIOS: Scenario[] = [
  {
    name: "quota_mode: refused only once every quota-mode descriptor is over; the others consume while it passes",
    options: {},
    steps: [
      {
        send: [
          ["service", "service_1"],
          ["service", "service_2"],
          ["user", "u"],
        ],
        expect: ok(["OK", 0], ["OK", 1], ["OK", 2]),
      },
      // service_1 is over: its status says so, the request passes and service_2 and user consume.
      {
        send: [
          ["service", "service_1"],
          ["service", "service_2"],
          ["user", "u"],
        ],
        expect: ok(["OVER_LIMIT", 0], ["OK", 0], ["OK", 1]),
      },
      // Both over: refused, and user gives back its hit (it reports what it still holds).
      {
        send: [
          ["service", "service_1"],
          ["service", "service_2"],
          ["user", "u"],
        ],
        expect: over(50, ["OVER_LIMIT", 0], ["OVER_LIMIT", 0], ["OK", 1]),
      },
      { send: [["user", "u"]], expect: ok(["OK", 0]) },
      { send: [["user", "u"]], expect: over(50, ["OVER_LIMIT", 0]) },
    ],
    counters: {
      "qm.service_service_1": { hits: 3, withinLimit: 1, nearLimit: 1, overLimit: 2, shadowMode: 0 },
      "qm.service_service_2": { hits: 3, withinLimit: 2, nearLimit: 1, overLimit: 1, shadowMode: 0 },
      // Near from 3 of 3: step 3 (refused: counted at the use it would have reached) and step 4.
      "qm.user": { hits: 5, withinLimit: 4, nearLimit: 2, overLimit: 1, shadowMode: 0 },
    },
    shadowed: 0,
  },
  {
    name: "quota_mode: an ordinary descriptor over its limit refuses while the quota-mode one passes",
    options: {},
    steps: [
      ...repeat(1, { send: [["user", "v"]], expect: ok(["OK", 2]) }),
      ...repeat(1, { send: [["user", "v"]], expect: ok(["OK", 1]) }),
      ...repeat(1, { send: [["user", "v"]], expect: ok(["OK", 0]) }),
      {
        send: [
          ["user", "v"],
          ["service", "service_2"],
        ],
        expect: over(50, ["OVER_LIMIT", 0], ["OK", 2]),
      },
      { send: [["service", "service_2"]], expect: ok(["OK", 1]) },
    ],
    counters: {
      "qm.user": { hits: 4, withinLimit: 3, overLimit: 1 },
      "qm.service_service_2": { hits: 2, withinLimit: 2, overLimit: 0 },
    },
    shadowed: 0,
  },
  {
    name: "quota_mode: the only quota-mode descriptor of a request refuses it alone",
    options: {},
    steps: [
      {
        send: [
          ["user", "w"],
          ["service", "service_1"],
        ],
        expect: ok(["OK", 2], ["OK", 0]),
      },
      {
        send: [
          ["user", "w"],
          ["service", "service_1"],
        ],
        expect: over(50, ["OK", 2], ["OVER_LIMIT", 0]),
      },
      { send: [["user", "w"]], expect: ok(["OK", 1]) },
    ],
    counters: {
      "qm.user": { hits: 3, withinLimit: 3, overLimit: 0 },
      "qm.service_service_1": { hits: 2, withinLimit: 1, overLimit: 1 },
    },
    shadowed: 0,
  },
  {
    name: "quota_mode with shadow_mode: the shadow descriptor never counts as over, so the request passes",
    options: {},
    steps: [
      {
        send: [
          ["soft", "s"],
          ["service", "service_1"],
        ],
        expect: ok(["OK", 0], ["OK", 0]),
      },
      {
        send: [
          ["soft", "s"],
          ["service", "service_1"],
        ],
        expect: ok(["OK", 0], ["OVER_LIMIT", 0]),
      },
    ],
    counters: {
      "qm.soft": { hits: 2, withinLimit: 1, overLimit: 0, shadowMode: 1 },
      "qm.service_service_1": { hits: 2, withinLimit: 1, overLimit: 1, shadowMode: 0 },
    },
    shadowed: 0,
  },
  {
    name: "quota_mode: an unlimited descriptor is not a quota-mode one; Retry-After is when the first quota-mode descriptor clears",
    options: {},
    steps: [
      {
        send: [
          ["service", "service_1"],
          ["slow", "x"],
        ],
        expect: ok(["OK", 0], ["OK", 0]),
      },
      // service_1 frees in 50 s, slow in 3590 s: the request passes again in 50 s.
      {
        send: [
          ["service", "service_1"],
          ["slow", "x"],
          ["free", "f"],
        ],
        expect: over(50, ["OVER_LIMIT", 0], ["OVER_LIMIT", 0], ["OK", U32]),
      },
    ],
    counters: {
      "qm.service_service_1": { hits: 2, withinLimit: 1, overLimit: 1 },
      "qm.slow": { hits: 2, withinLimit: 1, overLimit: 1 },
      "qm.free": { hits: 1, withinLimit: 1, overLimit: 0 },
    },
    shadowed: 0,
  },
  {
    name: "quota_mode: a quota-mode limit that refuses consumes nothing, even when the request passes",
    options: {},
    steps: [
      // A cost of 3 on a limit of 2 can never pass; service_1 passes, so the request does.
      {
        send: [
          ["service", "service_2", 3],
          ["service", "service_1"],
        ],
        expect: ok(["OVER_LIMIT", 0], ["OK", 0]),
      },
      { send: [["service", "service_2"]], expect: ok(["OK", 1]) },
      // Both over: service_2 never clears for a cost of 3, service_1 does in 50 s.
      {
        send: [
          ["service", "service_2", 3],
          ["service", "service_1"],
        ],
        expect: over(50, ["OVER_LIMIT", 0], ["OVER_LIMIT", 0]),
      },
    ],
    counters: {
      "qm.service_service_2": { hits: 7, withinLimit: 1, overLimit: 6 },
      "qm.service_service_1": { hits: 2, withinLimit: 1, overLimit: 1 },
    },
    shadowed: 0,
  },
  {
    name: "global quota mode: every descriptor is in quota mode, one without a rule included",
    options: { globalQuotaMode: true },
    steps: [
      { send: [["user", "a"]], expect: ok(["OK", 2]) },
      { send: [["user", "a"]], expect: ok(["OK", 1]) },
      { send: [["user", "a"]], expect: ok(["OK", 0]) },
      { send: [["user", "a"]], expect: over(50, ["OVER_LIMIT", 0]) },
      {
        send: [
          ["user", "a"],
          ["user", "b"],
        ],
        expect: ok(["OVER_LIMIT", 0], ["OK", 2]),
      },
      {
        send: [
          ["user", "a"],
          ["user", "b"],
        ],
        expect: ok(["OVER_LIMIT", 0], ["OK", 1]),
      },
      {
        send: [
          ["user", "a"],
          ["user", "b"],
        ],
        expect: ok(["OVER_LIMIT", 0], ["OK", 0]),
      },
      {
        send: [
          ["user", "a"],
          ["user", "b"],
        ],
        expect: over(50, ["OVER_LIMIT", 0], ["OVER_LIMIT", 0]),
      },
      // As in the reference: a descriptor no rule matches is a quota-mode descriptor that is never over.
      {
        send: [
          ["user", "a"],
          ["nomatch", "z"],
        ],
        expect: ok(["OVER_LIMIT", 0], ["OK", 0]),
      },
      // An unlimited one does not count.
      {
        send: [
          ["user", "a"],
          ["free", "f"],
        ],
        expect: over(50, ["OVER_LIMIT", 0], ["OK", U32]),
      },
    ],
    counters: {
      "qm.user": { hits: 14, withinLimit: 6, nearLimit: 2, overLimit: 8, shadowMode: 0 },
      "qm.free": { hits: 1, withinLimit: 1 },
    },
    shadowed: 0,
  },
  {
    name: "global shadow mode: answers OK where it would refuse, consumes nothing then, counts shadow_mode",
    options: { globalShadowMode: true },
    steps: [
      { send: [["user", "c"]], expect: ok(["OK", 2]) },
      { send: [["user", "c"]], expect: ok(["OK", 1]) },
      { send: [["user", "c"]], expect: ok(["OK", 0]) },
      // Statuses keep OVER_LIMIT (as the reference's); no Retry-After, no body.
      { send: [["user", "c"]], expect: ok(["OVER_LIMIT", 0]) },
      {
        send: [
          ["user", "c"],
          ["service", "service_2"],
        ],
        expect: ok(["OVER_LIMIT", 0], ["OK", 2]),
      },
      { send: [["service", "service_2"]], expect: ok(["OK", 1]) },
    ],
    counters: {
      "qm.user": { hits: 5, withinLimit: 3, nearLimit: 1, overLimit: 0, shadowMode: 2 },
      "qm.service_service_2": { hits: 2, withinLimit: 2, overLimit: 0, shadowMode: 0 },
    },
    shadowed: 2,
  },
  {
    name: "global shadow and global quota mode together",
    options: { globalShadowMode: true, globalQuotaMode: true },
    steps: [
      {
        send: [
          ["user", "d"],
          ["user", "e"],
        ],
        expect: ok(["OK", 2], ["OK", 2]),
      },
      {
        send: [
          ["user", "d"],
          ["user", "e"],
        ],
        expect: ok(["OK", 1], ["OK", 1]),
      },
      { send: [["user", "d"]], expect: ok(["OK", 0]) },
      // e passes: not refused at all, so nothing for shadow mode to turn.
      {
        send: [
          ["user", "d"],
          ["user", "e"],
        ],
        expect: ok(["OVER_LIMIT", 0], ["OK", 0]),
      },
      // Both over: refused, answered OK.
      {
        send: [
          ["user", "d"],
          ["user", "e"],
        ],
        expect: ok(["OVER_LIMIT", 0], ["OVER_LIMIT", 0]),
      },
    ],
    counters: {
      "qm.user": { hits: 9, withinLimit: 6, nearLimit: 2, overLimit: 1, shadowMode: 2 },
    },
    shadowed: 1,
  },
];

/** The wire descriptors of a step. */
export function wireDescriptors(send: D[]): WireDescriptor[] {
  return send.map(([key, value, hits]) => (hits === undefined ? { entries: [{ key, value }] } : { entries: [{ key, value }], hits_addend: { value: hits } }));
}

/** A RateLimitResponse (from the wire, or toWireResponse) as an Answer. */
export function answerOf(res: WireResponse): Answer {
  const code = (c: string | number): Code => (c === 1 || c === "OK" ? "OK" : "OVER_LIMIT");
  const a: Answer = { code: code(res.overall_code), statuses: res.statuses.map((s) => [code(s.code), s.limit_remaining ?? 0]) };
  const retry = res.response_headers_to_add?.find((h) => h.key.toLowerCase() === "retry-after");
  if (retry) a.retryAfter = Number(retry.value);
  return a;
}
