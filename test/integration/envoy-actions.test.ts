// Every action Envoy can send, through Envoy 1.40's own binary into a rule: docs/rules.md's table "What Envoy
// sends", read row by row, so the docs cannot drift from Envoy. Each row gets an Envoy of its own (its domain, its
// rate_limits entry) in front of one `sluice serve` holding every row's rule. sluice answers with the reference's
// dynamic_metadata (the request as it decoded it), which Envoy hands the upstream in a header: the test sees
// exactly what sluice received. Envoy's x-ratelimit headers show the count after each request, and the request
// past the limit gets 429: the rule matched and counted the row's hits.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { parse, stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { envoyAvailable, pointListener, rateLimitEnvoyConfig, startEchoUpstream, startEnvoy, type EchoUpstream } from "../helpers/envoy.js";
import { roomInWindow } from "../helpers/minute.js";
import { ROOT, ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";

type Obj = Record<string, any>;

const RULES_MD = path.join(ROOT, "docs/rules.md");
const PER_ROUTE = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute";
const SET_METADATA = "type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config";
const SET_FILTER_STATE = "type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config";
const HCM_FIELDS = new Set(["use_remote_address", "xff_num_trusted_hops"]);

interface Row {
  /** Line in docs/rules.md and a short name, for the test's name. */
  line: number;
  name: string;
  place: "route" | "filter" | "per-route";
  entry: Obj;
  /** Settings besides the entry, by name (the "with" spans). */
  extras: Obj;
  method: string;
  path: string;
  headers: Record<string, string>;
  from?: string;
  /** undefined: Envoy sends no descriptor (no call). */
  receives?: { entries: string[]; hitsAddend?: number; limit?: string; requestHitsAddend?: number };
  rule?: Obj;
}

const spans = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);

/** The rows of the table under "## What Envoy sends". */
function readRows(): Row[] {
  const lines = fs.readFileSync(RULES_MD, "utf8").split("\n");
  const start = lines.indexOf("## What Envoy sends");
  if (start < 0) throw new Error("docs/rules.md has no section '## What Envoy sends'");
  const rows: Row[] = [];
  for (let i = start + 1; i < lines.length && !lines[i].startsWith("## "); i++) {
    const l = lines[i];
    if (!l.startsWith("| ") || l.startsWith("| in |")) continue;
    const cells = l.slice(2, -2).split(" | ");
    if (cells.length !== 5) throw new Error(`docs/rules.md:${i + 1}: expected 5 cells, found ${cells.length}`);
    rows.push(readRow(i + 1, cells));
  }
  return rows;
}

function readRow(line: number, [place, config, request, receives, rule]: string[]): Row {
  const where = `docs/rules.md:${line}`;
  if (place !== "route" && place !== "filter" && place !== "per-route") throw new Error(`${where}: unknown place '${place}'`);
  const [entrySpan, ...withSpans] = spans(config);
  const extras: Obj = {};
  for (const s of withSpans) Object.assign(extras, parse(s.startsWith("{") ? s : `{${s}}`));
  const [requestLine, ...headerSpans] = spans(request);
  const [method, p] = requestLine.split(" ");
  const headers: Record<string, string> = {};
  for (const h of headerSpans) {
    const colon = h.indexOf(": ");
    headers[h.slice(0, colon)] = h.slice(colon + 2);
  }
  const from = /from (\S+?),? /.exec(`${request} `)?.[1];
  const entry = parse(entrySpan);
  const actions = (entry.actions as Obj[]).map((a) => Object.keys(a)[0]).join(" + ");
  const name = `${place} ${actions}${withSpans.length ? ` with ${withSpans.join(", ")}` : ""}: ${request.replaceAll("`", "")}`;
  const row: Row = { line, name, place, entry, extras, method, path: p, headers, from };
  if (!receives.startsWith("nothing")) {
    const r: NonNullable<Row["receives"]> = { entries: [] };
    // A note in parentheses is for the reader.
    for (const s of spans(receives.replace(/\([^)]*\)/g, ""))) {
      if (s.startsWith("hits_addend: ")) r.hitsAddend = Number(s.slice(13));
      else if (s.startsWith("request hits_addend: ")) r.requestHitsAddend = Number(s.slice(21));
      else if (s.startsWith("limit: ")) r.limit = s.slice(7);
      else if (s.includes("=")) r.entries.push(s);
      else throw new Error(`${where}: cannot read '${s}' in the receives cell`);
    }
    if (r.entries.length === 0 && !receives.includes("no entries")) throw new Error(`${where}: no entries in the receives cell`);
    row.receives = r;
  }
  const ruleSpan = spans(rule)[0];
  if (ruleSpan?.startsWith("{")) row.rule = parse(ruleSpan);
  return row;
}

/** The row's Envoy: its entry where the row puts it, the "with" settings, and the upstream header with what sluice saw. */
async function rowConfig(row: Row, domain: string, sluicePort: number, appPort: number): Promise<{ config: Obj; listenerPort: number }> {
  const { entry, extras } = row;
  const route: Obj = {
    name: "row",
    match: { prefix: "/" },
    route: { cluster: "app", rate_limits: row.place === "route" ? [entry] : [] },
    // sluice's reference dynamic_metadata echoes the request it decoded; Envoy puts it in a header for the upstream.
    request_headers_to_add: [{ header: { key: "x-sluice-saw", value: "%DYNAMIC_METADATA(envoy.filters.http.ratelimit)%" } }],
  };
  if (row.place === "per-route") route.typed_per_filter_config = { "envoy.filters.http.ratelimit": { "@type": PER_ROUTE, rate_limits: [entry] } };
  const hcm: Obj = {};
  const filtersBefore: Obj[] = [];
  for (const [k, v] of Object.entries(extras)) {
    if (HCM_FIELDS.has(k)) hcm[k] = v;
    else if (k === "set_metadata") filtersBefore.push({ name: "envoy.filters.http.set_metadata", typed_config: { "@type": SET_METADATA, metadata: [v] } });
    else if (k === "set_filter_state")
      filtersBefore.push({ name: "envoy.filters.http.set_filter_state", typed_config: { "@type": SET_FILTER_STATE, on_request_headers: [v] } });
    else if (k === "metadata") route.metadata = v;
    else if (k !== "node" && k !== "listener") throw new Error(`docs/rules.md:${row.line}: unknown setting '${k}'`);
  }
  // A generous timeout: on a busy host a fresh Envoy's first call (connect, h2 handshake) can take over 100 ms, and
  // a timed-out call would pass unseen (failure_mode_deny false) instead of failing the row.
  const filter: Obj = { domain, timeout: "5s", enable_x_ratelimit_headers: "DRAFT_VERSION_03" };
  if (row.place === "filter") filter.rate_limits = [entry];
  const out = await rateLimitEnvoyConfig({ sluicePorts: [sluicePort], appPort, filter, hcm, filtersBefore, routes: [route] });
  if (extras.node) out.config.node = { id: "actions-test", ...extras.node };
  if (extras.listener) pointListener(out.config, "edge", out.listenerPort, extras.listener);
  return out;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function send(host: string, port: number, row: Row): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host, port, method: row.method, path: row.path, headers: row.headers, localAddress: row.from, agent: false, timeout: 10_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("no answer from Envoy in 10 s")));
    req.on("error", reject);
    req.end();
  });
}

/** What sluice decoded, as the upstream received it (undefined: no call, so no metadata). */
function sluiceSaw(a: Answer): Obj | undefined {
  const h = JSON.parse(a.body).headers["x-sluice-saw"];
  return h === undefined ? undefined : JSON.parse(h);
}

const rows = readRows();
const domainOf = (i: number) => `row${i + 1}`;
/** Hits each request adds, as the row says sluice receives them. */
const hitsOf = (r: Row) => r.receives?.hitsAddend ?? r.receives?.requestHitsAddend ?? 1;
/** The limit each row's rule gets: two requests' worth, so the third is refused (hits 0: never). */
const limitOf = (r: Row) => (hitsOf(r) === 0 ? 2 : 2 * hitsOf(r));

/** The row's rule file: its rule with a token bucket on its last level (no window edge to cross mid-test). */
function ruleFile(r: Row, domain: string): string {
  const top = structuredClone(r.rule!);
  let last = top;
  while (last.descriptors) last = last.descriptors[0];
  last.rate_limit = { unit: "hour", requests_per_unit: limitOf(r), algorithm: "token_bucket" };
  return stringify({ domain, descriptors: [top] });
}

describe.runIf(envoyAvailable(import.meta.filename))("docs/rules.md 'What Envoy sends', row by row through Envoy 1.40", () => {
  let sluice: SluiceProcess;
  let upstream: EchoUpstream;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    const files: Record<string, string> = {};
    rows.forEach((r, i) => {
      if (r.rule) files[`${domainOf(i)}.yaml`] = ruleFile(r, domainOf(i));
      // A limit override counts only in a domain sluice knows: a file with no descriptors.
      else if (r.receives?.limit) files[`${domainOf(i)}.yaml`] = stringify({ domain: domainOf(i) });
    });
    sluice = await startSluice(["--config", ruleDir(files)], { SLUICE_RESPONSE_DYNAMIC_METADATA: "reference" });
  });
  afterAll(async () => {
    await sluice?.stop();
    await upstream?.close();
  });

  it("the table has a row for every action", () => {
    const actions = new Set(rows.flatMap((r) => r.entry.actions.map((a: Obj) => Object.keys(a)[0])));
    expect([...actions].sort()).toEqual(
      [
        "destination_cluster",
        "extension",
        "generic_key",
        "header_value_match",
        "masked_remote_address",
        "metadata",
        "query_parameter_value_match",
        "query_parameters",
        "remote_address",
        "request_headers",
        "source_cluster",
      ].sort(),
    );
  });

  it.concurrent.for(rows.map((r, i) => ({ r, i, name: `docs/rules.md:${r.line} ${r.name}` })))(
    "$name",
    { timeout: 60_000 },
    async ({ r, i }, { onTestFailed, expect }) => {
      const domain = domainOf(i);
      const { config, listenerPort } = await rowConfig(r, domain, sluice.port, upstream.port);
      const envoy = await startEnvoy(config, { concurrency: 1 });
      onTestFailed(() => console.error(`Envoy's log (${envoy.logFile}), last 40 lines:\n${envoy.log().split("\n").slice(-40).join("\n")}`));
      try {
        const host = r.extras.listener ?? "127.0.0.1";
        const expected = r.receives && {
          domain,
          descriptors: [
            {
              entries: r.receives.entries,
              ...(r.receives.hitsAddend !== undefined ? { hitsAddend: r.receives.hitsAddend } : {}),
              ...(r.receives.limit !== undefined ? { limit: r.receives.limit } : {}),
            },
          ],
          ...(r.receives.requestHitsAddend !== undefined ? { hitsAddend: r.receives.requestHitsAddend } : {}),
        };
        const counted = r.rule !== undefined || r.receives?.limit !== undefined;
        // A limit override counts in a fixed window of an hour: not across its edge.
        if (r.receives?.limit !== undefined) await roomInWindow(3600, 10);
        const hits = hitsOf(r);
        const limit = r.receives?.limit !== undefined ? Number(/requests_per_unit:(\d+)/.exec(r.receives.limit)![1]) : limitOf(r);
        for (let k = 1; k <= 3; k++) {
          const a = await send(host, listenerPort, r);
          if (counted && hits > 0 && k === 3) {
            expect(a.status, "the request past the limit").toBe(429);
            expect(a.headers["x-envoy-ratelimited"]).toBe("true");
            continue;
          }
          expect(a.status).toBe(200);
          expect(sluiceSaw(a)).toEqual(expected);
          if (counted) {
            expect(a.headers["x-ratelimit-limit"]).toBe(`${limit}, ${limit};w=3600`);
            expect(a.headers["x-ratelimit-remaining"]).toBe(String(limit - k * hits));
          } else {
            expect(a.headers["x-ratelimit-limit"]).toBeUndefined();
          }
        }
        // Envoy's own count of its calls: none when it sent no descriptor.
        const calls = r.receives === undefined ? 0 : 3;
        const refused = counted && hits > 0 ? 1 : 0;
        expect(await envoy.stat("cluster.app.ratelimit.ok")).toBe(calls - refused);
        expect(await envoy.stat("cluster.app.ratelimit.over_limit")).toBe(refused);
        expect(await envoy.stat("cluster.app.ratelimit.error")).toBe(0);
      } finally {
        await envoy.stop();
      }
    },
  );
});
