// The deny note never changes an answer: random request sequences run through two limiters, one with
// the note and one without, each on its own store (the memory store, then two real Redis servers with
// the scripts' time pinned to the same clock). Every answer must have the same code, the same
// remaining per status and the same limits; timing fields may differ by at most 1 s (the note keeps
// whole-second figures). Repeated descriptors, overrides, hits 0-5, shadow limits, quotas, a
// block-everything rule, quota_mode descriptors, reloads between calls and reloads while a call is in
// flight; and the same with global shadow mode, global quota mode and both.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Limiter, type LimiterOptions } from "../../src/limiter/limiter.js";
import type { Decision, DescriptorRequest, RateLimitRequest } from "../../src/limiter/types.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import type { RuleSet } from "../../src/rules/model.js";
import { ManualClock } from "../helpers/manual-clock.js";
import { MemoryStore } from "../../src/store/memory.js";
import { RedisStore } from "../../src/store/redis-sharded.js";
import type { Store } from "../../src/store/store.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";

const rulesText = (fw: number, tbRate: number, tbBurst: number, quota: number) => `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: ${fw}}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: ${tbRate}, algorithm: token_bucket, burst: ${tbBurst}}
  - key: q
    quota: {period: month, limit: ${quota}}
  - key: m
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: ${fw + 1}, algorithm: token_bucket}
  - key: s
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: z
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: u
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: qa
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: ${fw - 2}}
  - key: qb
    quota_mode: true
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: ${tbRate}, algorithm: token_bucket, burst: ${tbBurst}}
  - key: qq
    quota_mode: true
    quota: {period: day, limit: ${quota}}
  - key: qs
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: qz
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 0}
`;
const RULES: RuleSet[] = [rulesText(4, 3, 4, 5), rulesText(6, 2, 3, 7)].map(
  (text) => loadRuleFiles([{ name: "d.yaml", text }], { mergeDomains: false }).rules!,
);

/** A small deterministic PRNG, so a failing sequence can be replayed from its seed. */
function prng(seed: number) {
  let x = seed >>> 0 || 1;
  const next = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
  return { next, int: (n: number) => Math.floor(next() * n), pick: <T>(a: readonly T[]) => a[Math.floor(next() * a.length)] };
}

type Op = { kind: "call"; req: RateLimitRequest } | { kind: "advance"; ms: number } | { kind: "reload"; to: number; inFlight?: RateLimitRequest };

function randomRequest(r: ReturnType<typeof prng>, ns: string): RateLimitRequest {
  const n = r.next() < 0.6 ? 1 : 2 + r.int(2);
  const descriptors: DescriptorRequest[] = [];
  for (let i = 0; i < n; i++) {
    const key = r.pick(["a", "a", "b", "b", "q", "m", "s", "u", "z", "qa", "qa", "qb", "qq", "qs", "qz", "none"] as const);
    if ((key === "z" || key === "qz") && r.next() < 0.6) continue;
    const d: DescriptorRequest = { entries: [{ key, value: ns + r.pick(["x", "y"]) }] };
    if ((key === "a" || key === "u") && r.next() < 0.2) d.override = { requestsPerUnit: 2 + r.int(2), unit: "minute" };
    if (r.next() < 0.3) d.hits = r.int(6);
    descriptors.push(d);
  }
  // Repeated descriptors: Envoy sends one twice when a virtual host and a route both carry its action.
  if (descriptors.length > 0 && r.next() < 0.25) descriptors.push(structuredClone(descriptors[r.int(descriptors.length)]));
  return { domain: "d", descriptors, hitsAddend: r.next() < 0.8 ? 0 : r.int(3) };
}

function randomSequence(seed: number, withInFlight: boolean): Op[] {
  const r = prng(seed);
  const ns = `s${seed}-`;
  const ops: Op[] = [];
  let rules = 0;
  const length = 8 + r.int(16);
  const sent: RateLimitRequest[] = [];
  for (let i = 0; i < length; i++) {
    const p = r.next();
    if (p < 0.75) {
      // Mostly the same few requests again: that is what exhausts limits and makes notes.
      const req = sent.length > 0 && r.next() < 0.6 ? r.pick(sent) : randomRequest(r, ns);
      sent.push(req);
      ops.push({ kind: "call", req });
    } else if (p < 0.93) ops.push({ kind: "advance", ms: r.pick([1, 1, 250, 499, 500, 1000, 15_000, 20_000, 60_000, 3_600_000]) });
    else {
      rules = 1 - rules;
      ops.push({ kind: "reload", to: rules, inFlight: withInFlight && r.next() < 0.5 ? randomRequest(r, ns) : undefined });
    }
  }
  return ops;
}

interface Side {
  limiter: Limiter;
}

/** What must be equal with the note on and off; timing fields are compared within 1 s apart. */
function comparable(d: Decision) {
  return {
    code: d.code,
    shadowed: d.shadowed === true,
    statuses: d.statuses.map((s) => ({
      code: s.code,
      remaining: s.remaining,
      limit: s.limit && `${s.limit.path}/${s.limit.label}/${s.limit.requestsPerUnit}`,
    })),
    quotaResets: d.quotaResetsAtMs !== undefined,
  };
}

function expectSame(on: Decision, off: Decision, where: string): void {
  expect(comparable(on), where).toEqual(comparable(off));
  expect(on.retryAfterSeconds === undefined, where).toBe(off.retryAfterSeconds === undefined);
  if (on.retryAfterSeconds !== undefined) expect(Math.abs(on.retryAfterSeconds - off.retryAfterSeconds!), where).toBeLessThanOrEqual(1);
  for (let i = 0; i < on.statuses.length; i++) {
    const a = on.statuses[i].resetSeconds;
    const b = off.statuses[i].resetSeconds;
    expect(a === undefined, where).toBe(b === undefined);
    if (a !== undefined) expect(Math.abs(a - b!), where).toBeLessThanOrEqual(1);
  }
}

interface Tally {
  calls: number;
  /** Answers that came from the note (the test must exercise it). */
  fromNote: number;
  /** OK answers with an OVER_LIMIT status (a quota-mode descriptor over, or a shadowed refusal). */
  okWithOver: number;
  shadowed: number;
}

/** Runs the sequences on both sides and counts what they exercised. */
async function runSequences(seeds: number[], clock: ManualClock, on: Side, off: Side, withInFlight: boolean): Promise<Tally> {
  let calls = 0;
  let fromNote = 0;
  let okWithOver = 0;
  let shadowed = 0;
  for (const seed of seeds) {
    on.limiter.setRules(RULES[0]);
    off.limiter.setRules(RULES[0]);
    for (const [step, op] of randomSequence(seed, withInFlight).entries()) {
      const where = `seed ${seed} step ${step}: ${JSON.stringify(op)}`;
      if (op.kind === "advance") clock.advance(op.ms);
      else if (op.kind === "reload") {
        if (op.inFlight) {
          // The note side's call is in flight while the rules change: its note must not outlive them.
          const pending = on.limiter.shouldRateLimit(op.inFlight);
          on.limiter.setRules(RULES[op.to]);
          const a = await pending;
          const b = await off.limiter.shouldRateLimit(op.inFlight);
          off.limiter.setRules(RULES[op.to]);
          expectSame(a, b, where);
          calls++;
        } else {
          on.limiter.setRules(RULES[op.to]);
          off.limiter.setRules(RULES[op.to]);
        }
      } else {
        const a = await on.limiter.shouldRateLimit(op.req);
        const b = await off.limiter.shouldRateLimit(op.req);
        expectSame(a, b, where);
        calls++;
        if (a.outcomes.some((o) => o.via === "deny_note")) fromNote++;
        if (a.code === "OK" && a.statuses.some((s) => s.code === "OVER_LIMIT")) okWithOver++;
        if (a.shadowed) shadowed++;
      }
    }
  }
  return { calls, fromNote, okWithOver, shadowed };
}

/** The limiter variants: sluice's defaults, then the reference's global modes. */
const VARIANTS: { name: string; options: LimiterOptions }[] = [
  { name: "defaults", options: {} },
  { name: "global shadow mode", options: { globalShadowMode: true } },
  { name: "global quota mode", options: { globalQuotaMode: true } },
  { name: "global shadow and quota mode", options: { globalShadowMode: true, globalQuotaMode: true } },
];

const seeds = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe("deny note on vs off: identical answers", () => {
  // The defaults run most sequences; each global mode a quarter as many.
  const memorySeeds = (v: number) => (v === 0 ? seeds(1, 10_000) : seeds(v * 1_000_000, 2500));
  const redisSeeds = (v: number) => (v === 0 ? seeds(100_000, 2000) : seeds(v * 1_000_000 + 100_000, 500));

  VARIANTS.forEach(({ name, options }, v) => {
    it(`memory store, ${name}, ${memorySeeds(v).length} random sequences`, async () => {
      const clock = new ManualClock(Date.parse("2027-01-31T23:58:00.000Z") * 1000);
      const side = (maxNotes: number): Side => ({
        limiter: new Limiter(RULES[0], new MemoryStore({ clock }), { clock, denyNoteMaxEntries: maxNotes, ...options }),
      });
      const t = await runSequences(memorySeeds(v), clock, side(1000), side(0), true);
      expect(t.calls).toBeGreaterThan(memorySeeds(v).length * 6);
      expect(t.fromNote).toBeGreaterThan(memorySeeds(v).length / 20); // the note really answered
      expect(t.okWithOver).toBeGreaterThan(memorySeeds(v).length / 20); // quota mode (or shadow) let over-limit requests through
      if (options.globalShadowMode) expect(t.shadowed).toBeGreaterThan(memorySeeds(v).length / 10);
      else expect(t.shadowed).toBe(0);
    });
  });

  describe("Redis (two servers, scripts' time pinned to one clock)", () => {
    let redisOn: RedisProcess;
    let redisOff: RedisProcess;
    const stores: Store[] = [];
    beforeAll(async () => {
      [redisOn, redisOff] = await Promise.all([startRedis(), startRedis()]);
    });
    afterAll(async () => {
      for (const s of stores) await s.close();
      await Promise.all([redisOn?.stop(), redisOff?.stop()]);
    });

    VARIANTS.forEach(({ name, options }, v) => {
      it(`${name}, ${redisSeeds(v).length} random sequences`, async () => {
        // Ahead of real time: fixed windows and quotas expire at PXAT times Redis checks with its own clock.
        const clock = new ManualClock((Math.floor(Date.now() / 86_400_000) + 2 + v) * 86_400_000_000 - 120_000_000);
        const side = async (redis: RedisProcess, maxNotes: number): Promise<Side> => {
          const store = new RedisStore({ servers: [{ host: "127.0.0.1", port: redis.port }], timeoutMs: 10_000, logger: pino({ level: "silent" }), clock });
          stores.push(store);
          await store.start();
          return { limiter: new Limiter(RULES[0], store, { clock, denyNoteMaxEntries: maxNotes, ...options }) };
        };
        const [on, off] = await Promise.all([side(redisOn, 1000), side(redisOff, 0)]);
        const t = await runSequences(redisSeeds(v), clock, on, off, true);
        expect(t.calls).toBeGreaterThan(redisSeeds(v).length * 6);
        expect(t.fromNote).toBeGreaterThan(redisSeeds(v).length / 20);
        expect(t.okWithOver).toBeGreaterThan(redisSeeds(v).length / 20);
        if (options.globalShadowMode) expect(t.shadowed).toBeGreaterThan(redisSeeds(v).length / 10);
        else expect(t.shadowed).toBe(0);
      });
    });
  });
});
