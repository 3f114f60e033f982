// Envoy's side of sluice's answers, through Envoy 1.40's own binary: what a client gets for a refusal (429,
// x-envoy-ratelimited, Retry-After, the JSON body; a gRPC client's status), the x-ratelimit headers Envoy builds from
// sluice's statuses, the headers sluice adds, shadow and quota mode, and which rate_limits entries (route, virtual
// host, per-route config, the filter's own) Envoy sends. One Envoy per config; one sluice for all (domain per test).
import http2 from "node:http2";
import { stringify } from "yaml";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  envoyAvailable,
  envoyLogOnFailure,
  httpGet,
  rateLimitEnvoyConfig,
  startEchoUpstream,
  startEnvoy,
  type EchoUpstream,
  type EnvoyProcess,
  type HttpAnswer,
  type RateLimitEnvoyOptions,
} from "../helpers/envoy.js";
import { closeSession, h2Call, h2Session } from "../helpers/h2-call.js";
import { roomInWindow } from "../helpers/minute.js";
import { scrape } from "../helpers/prom.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

type Obj = Record<string, any>;

const PER_ROUTE = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute";
const generic = (value: string) => ({ actions: [{ generic_key: { descriptor_value: value } }] });
const header = (name: string, key: string) => ({ actions: [{ request_headers: { header_name: name, descriptor_key: key } }] });
const hourly = (requests: number, name?: string) => ({ unit: "hour", requests_per_unit: requests, ...(name ? { name } : {}) });
const rule = (key: string, value: string | undefined, rateLimit: Obj, extra: Obj = {}) => ({
  key,
  ...(value ? { value } : {}),
  rate_limit: rateLimit,
  ...extra,
});

/** Every domain's rules, one file each. */
const RULES: Record<string, Obj[]> = {
  refusal: [rule("generic_key", "two", hourly(2, "two_an_hour"))],
  grpc: [rule("generic_key", "unavailable", hourly(1)), rule("generic_key", "exhausted", hourly(1))],
  draft: [rule("user", undefined, hourly(3, "per_user")), rule("generic_key", "all", hourly(10, "global"))],
  headers: [rule("generic_key", "gold", hourly(2), { metadata: { plan: "gold" } })],
  shadow: [rule("generic_key", "shadow", hourly(1, "shadowed"), { shadow_mode: true })],
  quota: [rule("user", undefined, hourly(1, "user"), { quota_mode: true }), rule("org", undefined, hourly(3, "org"), { quota_mode: true })],
  charge: [rule("generic_key", "tokens", hourly(10))],
  placement: ["vh", "route", "per-route", "filter"].map((v) => rule("generic_key", v, hourly(100, v))),
  other: [rule("generic_key", "route", hourly(100, "other_domain"))],
};

/** Whole seconds from `ms` to the end of its hour (a fixed window of an hour ends there). */
const toHourEnd = (ms: number) => Math.max(1, Math.ceil(3600 - ((ms / 1000) % 3600)));

describe.runIf(envoyAvailable(import.meta.filename))("Envoy 1.40's side of sluice's answers", () => {
  let sluice: SluiceProcess;
  let upstream: EchoUpstream;
  const envoys: EnvoyProcess[] = [];

  /** An Envoy in front of `sluicePort` (default: the shared sluice), stopped after the file. */
  async function envoyFor(o: Omit<RateLimitEnvoyOptions, "sluicePorts" | "appPort"> & { sluicePort?: number; appPort?: number }) {
    const { config, listenerPort } = await rateLimitEnvoyConfig({
      sluicePorts: [o.sluicePort ?? sluice.port],
      appPort: o.appPort ?? upstream.port,
      ...o,
      // A generous timeout: a fresh Envoy's first call on a busy host must not pass by failure mode unseen.
      filter: { timeout: "5s", ...o.filter },
    });
    const envoy = await startEnvoy(config, { concurrency: 1 });
    envoys.push(envoy);
    envoyLogOnFailure(envoy);
    return { envoy, port: listenerPort };
  }

  /** The rate-limit filter's counts, under the route's cluster. */
  async function filterStats(envoy: EnvoyProcess) {
    const s = await envoy.stats();
    const at = (n: string) => s.get(`cluster.app.ratelimit.${n}`) ?? 0;
    return { ok: at("ok"), over_limit: at("over_limit"), error: at("error"), failure_mode_allowed: at("failure_mode_allowed") };
  }

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    const files = Object.fromEntries(Object.entries(RULES).map(([domain, descriptors]) => [`${domain}.yaml`, stringify({ domain, descriptors })]));
    sluice = await startSluice(["--config", ruleDir(files)]);
    // Every hourly fixed window below is used within seconds (tens on a busy host): not across the hour's edge.
    await roomInWindow(3600, 40);
  }, 90_000);
  beforeEach(() => envoyLogOnFailure(...envoys));
  afterAll(async () => {
    for (const e of envoys) await e.stop();
    await sluice?.stop();
    await upstream?.close();
  });

  it("the request past the limit gets 429 with x-envoy-ratelimited, sluice's Retry-After, content-type and JSON body; it never reaches the upstream", async () => {
    const { envoy, port } = await envoyFor({ filter: { domain: "refusal" }, rateLimits: [generic("two")] });
    const statuses = [(await httpGet(port, "/refusal")).status, (await httpGet(port, "/refusal")).status];
    const before = Date.now();
    const refused = await httpGet(port, "/refusal");
    const after = Date.now();
    expect(statuses).toEqual([200, 200]);
    expect(refused.status).toBe(429);
    const secs = Number(refused.headers["retry-after"]);
    expect(secs).toBeGreaterThanOrEqual(toHourEnd(after));
    expect(secs).toBeLessThanOrEqual(toHourEnd(before));
    expect(refused.headers["x-envoy-ratelimited"]).toBe("true");
    // sluice's content-type replaces the text/plain of Envoy's local reply.
    expect(refused.headers["content-type"]).toBe("application/json");
    expect(refused.body).toBe(`{"error":"rate_limited","retry_after_seconds":${secs}}`);
    expect(refused.headers["content-length"]).toBe(String(refused.body.length));
    // Envoy builds no x-ratelimit headers unless asked (enable_x_ratelimit_headers).
    expect(Object.keys(refused.headers).filter((h) => h.startsWith("x-ratelimit"))).toEqual([]);
    expect(upstream.received.filter((r) => r.path === "/refusal")).toHaveLength(2);
    expect(await filterStats(envoy)).toEqual({ ok: 2, over_limit: 1, error: 0, failure_mode_allowed: 0 });
    expect(await envoy.stat("cluster.app.upstream_rq_429")).toBe(1);
  });

  it("disable_x_envoy_ratelimited_header: true drops x-envoy-ratelimited and nothing else", async () => {
    const { port } = await envoyFor({ filter: { domain: "refusal", disable_x_envoy_ratelimited_header: true }, rateLimits: [generic("two")] });
    // The refusal test used the rule's two requests of this hour.
    const refused = await httpGet(port, "/refusal-quiet");
    expect(refused.status).toBe(429);
    expect(refused.headers["x-envoy-ratelimited"]).toBeUndefined();
    expect(refused.headers["content-type"]).toBe("application/json");
    expect(refused.body).toBe(`{"error":"rate_limited","retry_after_seconds":${refused.headers["retry-after"]}}`);
  });

  describe("a gRPC client", () => {
    let grpcUpstream: http2.Http2Server;
    let grpcCalls = 0;

    beforeAll(async () => {
      // An h2c gRPC upstream: an empty message and grpc-status 0 for every call.
      grpcUpstream = http2.createServer();
      grpcUpstream.on("stream", (stream) => {
        grpcCalls++;
        stream.resume();
        stream.on("end", () => {
          stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
          stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
          stream.end(Buffer.alloc(5));
        });
      });
      await new Promise<void>((resolve) => grpcUpstream.listen(0, "127.0.0.1", resolve));
    });
    afterAll(() => new Promise<void>((resolve) => grpcUpstream.close(() => resolve())));

    for (const [exhausted, code] of [
      [false, 14],
      [true, 8],
    ] as const) {
      it(`refused: HTTP 200 with grpc-status ${code}${exhausted ? " (rate_limited_as_resource_exhausted)" : " (UNAVAILABLE, the default)"} and sluice's body as grpc-message`, async () => {
        const { port } = await envoyFor({
          filter: { domain: "grpc", rate_limited_as_resource_exhausted: exhausted },
          rateLimits: [generic(exhausted ? "exhausted" : "unavailable")],
          appPort: (grpcUpstream.address() as { port: number }).port,
          appHttp2: true,
        });
        const session = h2Session(port);
        try {
          const callsBefore = grpcCalls;
          const call = () => h2Call(session, { path: "/shop.Orders/Get", body: Buffer.alloc(5) }).closed;
          const passed = await call();
          expect(passed.httpStatus).toBe(200);
          expect(passed.trailers?.["grpc-status"]).toBe("0");
          const before = Date.now();
          const refused = await call();
          const after = Date.now();
          expect(grpcCalls - callsBefore).toBe(1);
          // Trailers-only: the status is in the response headers.
          expect(refused.httpStatus).toBe(200);
          expect(refused.headersEndStream).toBe(true);
          expect(refused.grpcStatus).toBe(code);
          expect(refused.headers?.["content-type"]).toBe("application/grpc");
          expect(refused.headers?.["x-envoy-ratelimited"]).toBe("true");
          const secs = Number(refused.headers?.["retry-after"]);
          expect(secs).toBeGreaterThanOrEqual(toHourEnd(after));
          expect(secs).toBeLessThanOrEqual(toHourEnd(before));
          expect(refused.message).toBe(`{"error":"rate_limited","retry_after_seconds":${secs}}`);
        } finally {
          await closeSession(session);
        }
      });
    }
  });

  it("enable_x_ratelimit_headers: DRAFT_VERSION_03 turns sluice's statuses into exact x-ratelimit headers, on 200s and on the 429", async () => {
    const { envoy, port } = await envoyFor({
      filter: { domain: "draft", enable_x_ratelimit_headers: "DRAFT_VERSION_03" },
      // A descriptor no rule matches has no current_limit: Envoy leaves it out.
      rateLimits: [header("x-user", "user"), generic("all"), generic("unmatched")],
    });
    const answers: { a: HttpAnswer; before: number; after: number }[] = [];
    for (let i = 0; i < 4; i++) {
      const before = Date.now();
      const a = await httpGet(port, "/draft", { "x-user": "alice" });
      answers.push({ a, before, after: Date.now() });
    }
    expect(answers.map(({ a }) => a.status)).toEqual([200, 200, 200, 429]);
    // The first figure is the limit with the least remaining (per_user); then every limit as a quota policy.
    for (const { a } of answers) expect(a.headers["x-ratelimit-limit"]).toBe('3, 3;w=3600;name="per_user", 10;w=3600;name="global"');
    expect(answers.map(({ a }) => a.headers["x-ratelimit-remaining"])).toEqual(["2", "1", "0", "0"]);
    for (const { a, before, after } of answers) {
      const reset = Number(a.headers["x-ratelimit-reset"]);
      expect(reset).toBeGreaterThanOrEqual(toHourEnd(after));
      expect(reset).toBeLessThanOrEqual(toHourEnd(before));
    }
    expect(answers[3].a.headers["retry-after"]).toBe(answers[3].a.headers["x-ratelimit-reset"]);
    expect(await filterStats(envoy)).toEqual({ ok: 3, over_limit: 1, error: 0, failure_mode_allowed: 0 });
  });

  it("headers sluice adds reach the client (RateLimit-* on 200s and the 429); none reach the upstream, the rules' metadata does through Envoy's dynamic metadata", async () => {
    // sluice sends no request_headers_to_add: what it can hand the upstream is dynamic_metadata, which a route
    // can put in a header.
    const withHeaders = await startSluice(["--config", ruleDir({ "headers.yaml": stringify({ domain: "headers", descriptors: RULES.headers }) })], {
      SLUICE_RESPONSE_HEADERS: "true",
    });
    try {
      const { port } = await envoyFor({
        sluicePort: withHeaders.port,
        filter: { domain: "headers" },
        routes: [
          {
            match: { prefix: "/" },
            route: { cluster: "app", rate_limits: [generic("gold")] },
            request_headers_to_add: [{ header: { key: "x-rule-metadata", value: "%DYNAMIC_METADATA(envoy.filters.http.ratelimit:descriptors)%" } }],
          },
        ],
      });
      const answers: { a: HttpAnswer; before: number; after: number }[] = [];
      for (let i = 0; i < 3; i++) {
        const before = Date.now();
        const a = await httpGet(port, "/headers");
        answers.push({ a, before, after: Date.now() });
      }
      expect(answers.map(({ a }) => a.status)).toEqual([200, 200, 429]);
      expect(answers.map(({ a }) => [a.headers["ratelimit-limit"], a.headers["ratelimit-remaining"]])).toEqual([
        ["2", "1"],
        ["2", "0"],
        ["2", "0"],
      ]);
      for (const { a, before, after } of answers) {
        const reset = Number(a.headers["ratelimit-reset"]);
        expect(reset).toBeGreaterThanOrEqual(toHourEnd(after));
        expect(reset).toBeLessThanOrEqual(toHourEnd(before));
      }
      const refused = answers[2].a;
      expect(refused.headers["retry-after"]).toBe(refused.headers["ratelimit-reset"]);
      expect(refused.headers["content-type"]).toBe("application/json");
      // On a 200 sluice's headers join the upstream's answer, its own content-type kept.
      expect(answers[0].a.headers["content-type"]).toBe("application/json");
      expect(JSON.parse(answers[0].a.body).path).toBe("/headers");
      const seen = upstream.received.filter((r) => r.path === "/headers");
      expect(seen).toHaveLength(2);
      for (const r of seen) {
        expect(Object.keys(r.headers).filter((h) => /ratelimit|retry-after/.test(h))).toEqual([]);
        expect(JSON.parse(String(r.headers["x-rule-metadata"]))).toEqual([{ index: 0, metadata: { plan: "gold" } }]);
      }
    } finally {
      await withHeaders.stop();
    }
  });

  it("a shadow_mode rule: Envoy lets every request through, reports no remaining, and sluice counts what it would have refused", async () => {
    const { envoy, port } = await envoyFor({ filter: { domain: "shadow", enable_x_ratelimit_headers: "DRAFT_VERSION_03" }, rateLimits: [generic("shadow")] });
    const answers: HttpAnswer[] = [];
    for (let i = 0; i < 3; i++) answers.push(await httpGet(port, "/shadow"));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers.map((a) => a.headers["x-ratelimit-remaining"])).toEqual(["0", "0", "0"]);
    expect(answers.map((a) => a.headers["x-envoy-ratelimited"])).toEqual([undefined, undefined, undefined]);
    expect(upstream.received.filter((r) => r.path === "/shadow")).toHaveLength(3);
    expect(await filterStats(envoy)).toEqual({ ok: 3, over_limit: 0, error: 0, failure_mode_allowed: 0 });
    const samples = (await scrape(sluice.adminPort)).filter((s) => s.labels.domain === "shadow");
    const sum = (name: string) => samples.filter((s) => s.name === name).reduce((n, s) => n + s.value, 0);
    expect({ shadow: sum("sluice_rule_shadow_mode_total"), over: sum("sluice_rule_over_limit_total"), hits: sum("sluice_rule_hits_total") }).toEqual({
      shadow: 2,
      over: 0,
      hits: 3,
    });
  });

  it("quota_mode: a request passes while one of its quota_mode descriptors has room, and gets 429 when none has", async () => {
    const { envoy, port } = await envoyFor({
      filter: { domain: "quota", enable_x_ratelimit_headers: "DRAFT_VERSION_03" },
      rateLimits: [header("x-user", "user"), header("x-org", "org")],
    });
    const answers: HttpAnswer[] = [];
    for (let i = 0; i < 4; i++) answers.push(await httpGet(port, "/quota", { "x-user": "alice", "x-org": "acme" }));
    // The user's limit (1) is over from the second request on; the org's (3) carries the request until it is over too.
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
    expect(answers.map((a) => a.headers["x-ratelimit-remaining"])).toEqual(["0", "0", "0", "0"]);
    expect(upstream.received.filter((r) => r.path === "/quota")).toHaveLength(3);
    // Envoy looks at the overall code only: OK while a quota_mode descriptor had room.
    expect(await filterStats(envoy)).toEqual({ ok: 3, over_limit: 1, error: 0, failure_mode_allowed: 0 });
  });

  it("a cost charged after the response (apply_on_stream_done): counted while it fits; a charge past what is left is dropped, unless fixed windows count as the reference does", async () => {
    // The request-time entry only checks (hits_addend 0); the stream-done entry charges the request's cost.
    const filter = {
      domain: "charge",
      enable_x_ratelimit_headers: "DRAFT_VERSION_03",
      rate_limits: [
        { actions: [{ generic_key: { descriptor_value: "tokens" } }], hits_addend: { number: 0 } },
        { actions: [{ generic_key: { descriptor_value: "tokens" } }], apply_on_stream_done: true, hits_addend: { format: "%REQ(x-cost)%" } },
      ],
    };
    const run = async (target: SluiceProcess) => {
      const { port } = await envoyFor({ sluicePort: target.port, filter });
      const seen: [number, string | undefined][] = [];
      for (let k = 1; k <= 4; k++) {
        const a = await httpGet(port, "/charge", { "x-cost": "6" });
        seen.push([a.status, a.headers["x-ratelimit-remaining"] as string | undefined]);
        if (a.status !== 200) continue;
        // Envoy sends the charge after the response and ignores its answer: wait until sluice has counted it.
        const charged = 6 * seen.filter(([s]) => s === 200).length;
        await until(
          async () =>
            (await scrape(target.adminPort))
              .filter((x) => x.name === "sluice_rule_hits_total" && x.labels.domain === "charge")
              .reduce((n, x) => n + x.value, 0) === charged,
          10_000,
          () => `sluice did not count the stream-done charge ${k}`,
        );
      }
      return seen;
    };
    // sluice's own counting: a refused hit consumes nothing, so the second charge (6 of the 4 left) is dropped and
    // the budget never runs out.
    expect(await run(sluice)).toEqual([
      [200, "10"],
      [200, "4"],
      [200, "4"],
      [200, "4"],
    ]);
    // The reference's keys count refused hits too: the second charge runs the window over, later requests are refused.
    const referenceCounting = await startSluice(["--config", ruleDir({ "charge.yaml": stringify({ domain: "charge", descriptors: RULES.charge }) })], {
      SLUICE_REFERENCE_KEYS: "true",
    });
    try {
      expect(await run(referenceCounting)).toEqual([
        [200, "10"],
        [200, "4"],
        [429, "0"],
        [429, "0"],
      ]);
    } finally {
      await referenceCounting.stop();
    }
  });

  describe("which rate_limits entries Envoy sends", () => {
    // Each rule's limit is named after where its entry is; Envoy's x-ratelimit-limit lists the limits of the
    // descriptors sluice matched, in the order Envoy sent them.
    const policy = (name: string) => `100;w=3600;name="${name}"`;
    const limitsOf = (a: HttpAnswer) => (a.headers["x-ratelimit-limit"] as string | undefined)?.split(", ").slice(1) ?? [];
    const perRoute = (o: Obj) => ({ typed_per_filter_config: { "envoy.filters.http.ratelimit": { "@type": PER_ROUTE, ...o } } });
    const route = (path: string, rateLimits: Obj[] | undefined, more: Obj = {}, action: Obj = {}) => ({
      match: { path },
      route: { cluster: "app", ...(rateLimits ? { rate_limits: rateLimits } : {}), ...action },
      ...more,
    });

    it("route and virtual host: the virtual host's only when the route has none, both with include_vh_rate_limits or vh_rate_limits INCLUDE, none with IGNORE", async () => {
      const { envoy, port } = await envoyFor({
        filter: { domain: "placement", enable_x_ratelimit_headers: "DRAFT_VERSION_03" },
        virtualHost: { rate_limits: [generic("vh")] },
        routes: [
          route("/no-own", undefined),
          route("/own", [generic("route")]),
          route("/include-vh", [generic("route")], {}, { include_vh_rate_limits: true }),
          route("/vh-include", [generic("route")], perRoute({ vh_rate_limits: "INCLUDE" })),
          route("/vh-ignore", undefined, perRoute({ vh_rate_limits: "IGNORE" })),
          route("/vh-override", undefined, perRoute({ vh_rate_limits: "OVERRIDE" })),
          route("/vh-override-own", [generic("route")], perRoute({ vh_rate_limits: "OVERRIDE" })),
        ],
      });
      const sent: Record<string, string[]> = {};
      for (const p of ["/no-own", "/own", "/include-vh", "/vh-include", "/vh-ignore", "/vh-override", "/vh-override-own"]) {
        const a = await httpGet(port, p);
        expect(a.status).toBe(200);
        sent[p] = limitsOf(a);
      }
      expect(sent).toEqual({
        "/no-own": [policy("vh")],
        "/own": [policy("route")],
        "/include-vh": [policy("route"), policy("vh")],
        "/vh-include": [policy("route"), policy("vh")],
        "/vh-ignore": [],
        "/vh-override": [policy("vh")],
        "/vh-override-own": [policy("route")],
      });
      // /vh-ignore made no call at all.
      expect((await filterStats(envoy)).ok).toBe(6);
    });

    it("per-route config: its rate_limits replace the route's and the virtual host's, its domain replaces the filter's; override_option changes nothing in 1.40", async () => {
      const { port } = await envoyFor({
        filter: { domain: "placement", enable_x_ratelimit_headers: "DRAFT_VERSION_03" },
        virtualHost: { rate_limits: [generic("vh")] },
        routes: [
          route("/per-route-limits", [generic("route")], perRoute({ rate_limits: [generic("per-route")], vh_rate_limits: "INCLUDE" })),
          route("/per-route-domain", [generic("route")], perRoute({ domain: "other" })),
          route("/override-include", [generic("route")], perRoute({ override_option: "INCLUDE_POLICY" })),
          route("/override-ignore", [generic("route")], perRoute({ override_option: "IGNORE_POLICY" })),
        ],
      });
      const sent: Record<string, string[]> = {};
      for (const p of ["/per-route-limits", "/per-route-domain", "/override-include", "/override-ignore"]) {
        const a = await httpGet(port, p);
        expect(a.status).toBe(200);
        sent[p] = limitsOf(a);
      }
      expect(sent).toEqual({
        "/per-route-limits": [policy("per-route")],
        // The rule of domain "other" counted it.
        "/per-route-domain": [policy("other_domain")],
        "/override-include": [policy("route")],
        "/override-ignore": [policy("route")],
      });
    });

    it("the filter's own rate_limits replace the route's and the virtual host's; a per-route rate_limits still replaces them", async () => {
      const { port } = await envoyFor({
        filter: { domain: "placement", enable_x_ratelimit_headers: "DRAFT_VERSION_03", rate_limits: [generic("filter")] },
        virtualHost: { rate_limits: [generic("vh")] },
        routes: [
          route("/route-limits", [generic("route")], {}, { include_vh_rate_limits: true }),
          route("/per-route-limits", [generic("route")], perRoute({ rate_limits: [generic("per-route")] })),
        ],
      });
      expect(limitsOf(await httpGet(port, "/route-limits"))).toEqual([policy("filter")]);
      expect(limitsOf(await httpGet(port, "/per-route-limits"))).toEqual([policy("per-route")]);
    });
  });
});
