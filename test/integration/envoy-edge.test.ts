// The shipped pair envoy/envoy.yaml + config/: what Envoy sends for sample requests (computed from the file
// by test/helpers/envoy-actions.ts), and what a real `sluice serve` on config/ answers to sequences of them.
// The fast oracle: no Envoy here. Its claims are backed by Envoy 1.40 itself elsewhere: the emulation and this
// table by envoy-oracle.test.ts (generated requests and these rows, request by request), Envoy's side of each
// layer below once by envoy-shipped.test.ts.
import path from "node:path";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnvoyEdge, type EntryPattern, type HttpRequest } from "../helpers/envoy-actions.js";
import { EDGE_ROWS, get, login } from "../helpers/envoy-edge-rows.js";
import { OK, OVER_LIMIT, retryAfter, rlsClient, type RlsClient, type WireResponse } from "../helpers/grpc-client.js";
import { inOneMinute } from "../helpers/minute.js";
import { ROOT, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep } from "../helpers/wait.js";

const CONFIG_DIR = path.join(ROOT, "config");
const edge = new EnvoyEdge();

// The emulation against the table; envoy-oracle.test.ts runs the same rows through Envoy 1.40 itself.
describe("envoy.yaml: the descriptors each request produces", () => {
  for (const row of EDGE_ROWS) {
    it(row.name, () => {
      const call = edge.call(row.req);
      expect(call.route).toBe(row.route);
      expect(call.reply).toEqual(row.reply);
      expect(edge.descriptors(row.req)).toEqual(row.descriptors);
    });
  }

  it("asks domain edge at the filter's stage, all descriptors in one call", () => {
    expect(edge.domain).toBe("edge");
    expect(edge.stage).toBe(0);
    expect(edge.call(EDGE_ROWS[1].req).request).toEqual({
      domain: "edge",
      descriptors: EDGE_ROWS[1].descriptors.map((d) => ({ entries: d.map(([key, value]) => ({ key, value })) })),
    });
  });
});

/** Every chain of (key, value?) in config/ that ends at a rate limit. */
function rulePaths(): EntryPattern[][] {
  const out: EntryPattern[][] = [];
  const walk = (nodes: any[], prefix: EntryPattern[]) => {
    for (const n of nodes ?? []) {
      const here = [...prefix, n.value === undefined ? { key: n.key } : { key: n.key, value: String(n.value) }];
      if (n.rate_limit || n.rate_limits || n.quota) out.push(here);
      walk(n.descriptors, here);
    }
  };
  const doc = parse(readFileSync(path.join(CONFIG_DIR, "edge.yaml"), "utf8"));
  expect(doc.domain).toBe(edge.domain);
  walk(doc.descriptors, []);
  return out;
}

/** A rule path can receive what a pattern sends: same keys; where both fix a value, the same value. */
function fits(pattern: EntryPattern[], rule: EntryPattern[]): boolean {
  return (
    pattern.length === rule.length &&
    pattern.every((p, i) => p.key === rule[i].key && (p.value === undefined || rule[i].value === undefined || p.value === rule[i].value))
  );
}

describe("envoy.yaml and config/ cover each other", () => {
  const patterns = edge.patterns();
  const rules = rulePaths();
  const show = (p: EntryPattern[]) => p.map((e) => (e.value === undefined ? e.key : `${e.key}=${e.value}`)).join(",");

  it("every descriptor envoy.yaml sends has a rule", () => {
    const uncovered = patterns.filter((p) => !rules.some((r) => fits(p.entries, r))).map((p) => `${p.route}: ${show(p.entries)}`);
    expect(uncovered).toEqual([]);
  });

  it("every rule is reached by some descriptor envoy.yaml sends", () => {
    const unreached = rules.filter((r) => !patterns.some((p) => fits(p.entries, r))).map(show);
    expect(unreached).toEqual([]);
  });

  it("config/ holds the layered rules: per IP, per account, per API key and plan, per login account, for search", () => {
    expect(rules.map(show).sort()).toEqual(
      ["account", "api_key", "api_key,plan=free", "api_key,plan=pro", "generic_key=search", "login_account", "remote_address"].sort(),
    );
  });
});

// ---- sequences against a real sluice serving config/ ----
// sluice's side, at scale. Through a real Envoy once each (envoy-shipped.test.ts): 121 from one IP, x-forwarded-for
// or not; the 6th login at one account, from any IP; one account from 121 IPs; a key's burst of 20; a pro key's
// 20 a second in two seconds. The search layer: envoy-oracle.test.ts shows Envoy sends generic_key=search for every
// form of /search and its sample through a real sluice counts it exactly; 6,000 through Envoy would take ~10 s.

let sluice: SluiceProcess;
let client: RlsClient;

beforeAll(async () => {
  sluice = await startSluice(["--config", CONFIG_DIR]);
  client = rlsClient(sluice.port);
});

afterAll(async () => {
  client?.close();
  await sluice?.stop();
});

/** What Envoy would get back for this request (OK when Envoy would not call at all). */
async function send(req: HttpRequest): Promise<WireResponse> {
  const call = edge.call(req);
  if (!call.request) return { overall_code: OK, statuses: [] };
  return client.shouldRateLimit(call.request);
}

/** Runs the requests with a few in flight at a time; answers in request order. */
async function sendAll(reqs: HttpRequest[], inFlight = 32): Promise<WireResponse[]> {
  const answers: WireResponse[] = new Array(reqs.length);
  let next = 0;
  const worker = async () => {
    while (next < reqs.length) {
      const i = next++;
      answers[i] = await send(reqs[i]);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return answers;
}

const codes = (answers: WireResponse[]) => answers.map((a) => (a.overall_code === OK ? "OK" : a.overall_code === OVER_LIMIT ? "OVER" : String(a.overall_code)));
const count = (answers: WireResponse[], code: number) => answers.filter((a) => a.overall_code === code).length;
const CODE = { OK: 1, OVER_LIMIT: 2 };

/** An attacker's address pool: 10,000 distinct IPv4 addresses in 100.64.0.0/10. */
const attackerIp = (i: number) => `100.${64 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;

describe("sluice on config/ answers what envoy.yaml asks", () => {
  it("the 121st request from one IP in a minute is refused with Retry-After and a JSON body, x-forwarded-for or not", async () => {
    const reqs = Array.from({ length: 121 }, (_, i) => get("/orders", "192.0.2.10", { "x-forwarded-for": `10.0.0.${i}` }));
    const { answers, refused, before, after } = await inOneMinute(20, async () => {
      const answers: WireResponse[] = [];
      for (const r of reqs.slice(0, 120)) answers.push(await send(r));
      const before = Date.now();
      const refused = await send(reqs[120]);
      return { answers, refused, before, after: Date.now() };
    });
    expect(codes(answers)).toEqual(Array(120).fill("OK"));
    expect(answers[119].statuses[0].limit_remaining).toBe(0);
    expect(refused.overall_code).toBe(OVER_LIMIT);
    // Whole seconds until the minute ends, as measured around the call.
    const secs = Number(retryAfter(refused));
    expect(secs).toBeGreaterThanOrEqual(Math.max(1, Math.ceil(60 - ((after / 1000) % 60))));
    expect(secs).toBeLessThanOrEqual(Math.ceil(60 - ((before / 1000) % 60)));
    expect(refused.response_headers_to_add).toContainEqual({ key: "content-type", value: "application/json" });
    expect(JSON.parse(refused.raw_body!.toString())).toEqual({ error: "rate_limited", retry_after_seconds: secs });
    expect(refused.statuses[0]).toMatchObject({
      code: CODE.OVER_LIMIT,
      current_limit: { name: "per_ip", requests_per_unit: 120, unit: 2 },
      limit_remaining: 0,
    });

    // Another IP is not affected.
    expect((await send(get("/orders", "192.0.2.11"))).overall_code).toBe(OK);
  }, 180_000);

  it("the 6th login attempt at one account in a minute is refused, each from a different IP", async () => {
    const answers = await inOneMinute(15, async () => {
      const answers: WireResponse[] = [];
      for (let i = 0; i < 10; i++) answers.push(await send(login("alice", `198.18.0.${i + 1}`)));
      return answers;
    });
    expect(codes(answers)).toEqual([...Array(5).fill("OK"), ...Array(5).fill("OVER")]);
    const sixth = answers[5];
    expect(sixth.statuses.map((s) => s.code)).toEqual([CODE.OK, CODE.OVER_LIMIT]); // [remote_address, login_account]
    expect(sixth.statuses[1].current_limit).toMatchObject({ name: "login_per_account", requests_per_unit: 5 });
    expect(Number(retryAfter(sixth))).toBeGreaterThanOrEqual(1);
    // The layer is per account name: another account from the same IPs is untouched.
    expect((await send(login("bob", "198.18.0.10"))).overall_code).toBe(OK);
  }, 180_000);

  describe("an attacker with 10,000 IPs stays under the IP layer", () => {
    it("but the global /search limit lets 6,000 of 10,000 searches through in a minute", async () => {
      const answers = await inOneMinute(20, () => sendAll(Array.from({ length: 10_000 }, (_, i) => get(`/search?q=${i}`, attackerIp(i)))));
      expect([count(answers, OK), count(answers, OVER_LIMIT)]).toEqual([6000, 4000]);
      const refused = answers.filter((a) => a.overall_code === OVER_LIMIT);
      // [remote_address, generic_key=search]: never the IP layer, always the endpoint layer.
      expect(refused.every((a) => a.statuses[0].code === CODE.OK && a.statuses[1].code === CODE.OVER_LIMIT)).toBe(true);
      expect(refused[0].statuses[1].current_limit).toMatchObject({ name: "search_global", requests_per_unit: 6000 });
    }, 180_000);

    it("and one account used from 500 of them gets 120 requests in a minute", async () => {
      const answers = await inOneMinute(15, () =>
        sendAll(Array.from({ length: 500 }, (_, i) => get("/orders", attackerIp(i), { "x-account-id": "acct-stolen" }))),
      );
      expect([count(answers, OK), count(answers, OVER_LIMIT)]).toEqual([120, 380]);
      const refused = answers.filter((a) => a.overall_code === OVER_LIMIT);
      expect(refused.every((a) => a.statuses[0].code === CODE.OK && a.statuses[1].code === CODE.OVER_LIMIT)).toBe(true);
    }, 180_000);

    it("and login attempts at one account from 500 of them get 5 guesses in a minute", async () => {
      const answers = await inOneMinute(15, () => sendAll(Array.from({ length: 500 }, (_, i) => login("carol", attackerIp(i)))));
      expect([count(answers, OK), count(answers, OVER_LIMIT)]).toEqual([5, 495]);
    }, 180_000);
  });

  it("a free key bursts 20 from any IPs, then its bucket refuses; its monthly quota counts what passed", async () => {
    const keyReq = (i: number) => get("/orders", `203.0.113.${100 + i}`, { "x-api-key": "key-burst", "x-plan": "free" });
    const burst = await sendAll(
      Array.from({ length: 21 }, (_, i) => keyReq(i)),
      21,
    );
    expect([count(burst, OK), count(burst, OVER_LIMIT)]).toEqual([20, 1]);
    const refused = burst.find((a) => a.overall_code === OVER_LIMIT)!;
    expect(retryAfter(refused)).toBe("1");
    // [remote_address, api_key, api_key+plan]: the bucket refuses; the quota reports what is left of the month.
    expect(refused.statuses.map((s) => s.code)).toEqual([CODE.OK, CODE.OVER_LIMIT, CODE.OK]);
    expect(refused.statuses[1].current_limit).toMatchObject({ name: "per_api_key", requests_per_unit: 2, unit: 1 });
    expect(refused.statuses[2]).toMatchObject({ limit_remaining: 10_000 - 20, current_limit: { name: "free_monthly", requests_per_unit: 10_000, unit: 5 } });
  });

  it("a pro key gets 20 per second instead of the bucket (replaces), and its monthly quota", async () => {
    // A burst inside one second window (local clock: this sluice runs on the memory store).
    const ms = Date.now() % 1000;
    if (ms > 300) await sleep(1000 - ms + 10);
    const burst = await sendAll(
      Array.from({ length: 25 }, (_, i) => get("/orders", `203.0.113.${150 + i}`, { "x-api-key": "key-pro", "x-plan": "pro" })),
      25,
    );
    expect([count(burst, OK), count(burst, OVER_LIMIT)]).toEqual([20, 5]);
    const refused = burst.find((a) => a.overall_code === OVER_LIMIT)!;
    // The bucket is replaced: no limit reported for [api_key]; plan_pro refused.
    expect(refused.statuses[1].current_limit).toBeUndefined();
    expect(refused.statuses[2]).toMatchObject({ code: CODE.OVER_LIMIT, current_limit: { name: "plan_pro", requests_per_unit: 20, unit: 1 } });
    await sleep(1000 - (Date.now() % 1000) + 10);
    const next = await send(get("/orders", "203.0.113.200", { "x-api-key": "key-pro", "x-plan": "pro" }));
    // In a fresh second the tighter of the two is reported: 19 left this second, not 999,979 this month.
    expect(next.overall_code).toBe(OK);
    expect(next.statuses[2]).toMatchObject({ limit_remaining: 19, current_limit: { name: "plan_pro" } });
  });
});
