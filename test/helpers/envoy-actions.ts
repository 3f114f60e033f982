// Reads envoy/envoy.yaml and computes, for an HTTP/1.1 request, what Envoy 1.40 does with it: the answer Envoy
// gives itself (a redirect, a refusal), or the route it picks and the one ShouldRateLimit call it makes.
// test/integration/envoy-oracle.test.ts checks this model against Envoy's own binary, request by request;
// where the two differ, Envoy is right. As observed there, for the parts the file uses:
// - the request target: an absolute-form http:// target is routed on its path; a target that does not start
//   with "/" or holds a "#" (path or query) is refused with 400;
// - path_with_escaped_slashes_action UNESCAPE_AND_REDIRECT: a path (not query) holding %2F, %2f, %5C or %5c
//   is answered 307 with the unescaped, normalized path (and the query as sent) in Location; no call;
// - normalize_path: "\" is a "/"; %XX of an unreserved character (A-Z a-z 0-9 - . _ ~) is decoded, any other
//   %XX (and a stray %) kept as sent, in its case; " < > ` { } | ^ are escaped (%22...); then dot segments
//   (also %2e forms) are removed as in RFC 3986 5.2.4;
// - merge_slashes, after it: a path holding "//" becomes "/" + its non-empty segments joined by "/" + "/" if
//   it ended in "/" (so "//" and "///" stay "//");
// - the first route that matches the normalized :path wins (prefix on the whole :path; path and
//   path_separated_prefix on the path without its query: the prefix exactly or followed by "/";
//   case_sensitive defaults to true, false folds ASCII case); no route: 404, no call;
// - each rate_limits entry of the filter's stage gives one descriptor, its actions' entries in order;
//   an action that cannot produce its entry (a missing header without skip_if_absent) drops that whole
//   descriptor; all descriptors go in one call; no descriptor at all means no call;
// - request_headers takes the header's first value with surrounding spaces and tabs trimmed; a header sent
//   empty is present: its entry has the empty value (absent on the wire, proto3);
// - remote_address is the TCP peer's address, without port (use_remote_address: true, no trusted hops),
//   so x-forwarded-for never changes it.
// Anything else in the file (another action, header matchers on a route, virtual-host rate limits...), or a
// request the model has not been checked on (another scheme, characters outside printable ASCII), is refused
// with an error, so the model cannot silently disagree with Envoy.
import { readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { parse } from "yaml";
import type { WireDescriptor, WireRequest } from "./grpc-client.js";
import { ROOT } from "./sluice.js";

export const ENVOY_YAML = path.join(ROOT, "envoy/envoy.yaml");

export interface HttpRequest {
  method: string;
  /** The request target as sent: origin form (/path?query) or absolute form (http://host/path?query). */
  path: string;
  /** A list is sent as one header line per value. */
  headers?: Record<string, string | string[]>;
  clientIp: string;
}

/** One descriptor entry as a rate_limits entry will produce it; `value` only where the file fixes it. */
export interface EntryPattern {
  key: string;
  value?: string;
}

type Action =
  | { kind: "remote_address" }
  | { kind: "request_headers"; header: string; key: string; skipIfAbsent: boolean }
  | { kind: "generic_key"; key: string; value: string };

interface RouteModel {
  name: string;
  matcher: { kind: "prefix" | "path" | "path_separated_prefix"; value: string; caseSensitive: boolean };
  entries: Action[][];
}

/** What Envoy makes of a request target before routing. */
export type Target = { kind: "path"; path: string } | { kind: "redirect"; location: string } | { kind: "rejected" };

export interface EnvoyCall {
  /** The route's name; "(none)" when Envoy answers the request itself (`reply`). */
  route: string;
  /** undefined when no descriptor was produced, or no route: Envoy then does not call the service. */
  request?: WireRequest;
  /** Envoy's own answer, before any filter: 307 (escaped slashes), 400 (a target it refuses), 404 (no route). */
  reply?: { status: number; location?: string };
  /** The :path the filters and the app see, when a route was chosen. */
  path?: string;
}

type Obj = Record<string, any>;

function fail(what: string): never {
  throw new Error(`envoy.yaml: ${what} (not modelled by test/helpers/envoy-actions.ts)`);
}

function only(obj: Obj, allowed: string[], where: string): void {
  for (const k of Object.keys(obj ?? {})) if (!allowed.includes(k)) fail(`${where}: unexpected field '${k}'`);
}

const TYPE_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const TYPE_RATELIMIT = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit";

export class EnvoyEdge {
  readonly raw: Obj;
  readonly hcm: Obj;
  readonly rateLimitFilter: Obj;
  readonly domain: string;
  readonly stage: number;
  private readonly routes: RouteModel[];
  private readonly normalizePath: boolean;
  private readonly mergeSlashes: boolean;

  constructor(file = ENVOY_YAML) {
    this.raw = parse(readFileSync(file, "utf8"));
    const listeners: Obj[] = this.raw?.static_resources?.listeners ?? [];
    if (listeners.length !== 1) fail(`expected one listener, found ${listeners.length}`);
    const chains: Obj[] = listeners[0].filter_chains ?? [];
    if (chains.length !== 1 || chains[0].filters?.length !== 1) fail("expected one filter chain with one filter");
    this.hcm = chains[0].filters[0].typed_config;
    if (this.hcm?.["@type"] !== TYPE_HCM) fail("the listener's filter is not the HTTP connection manager");
    if (this.hcm.use_remote_address !== true) fail("use_remote_address is not true: remote_address would come from x-forwarded-for");
    if ((this.hcm.xff_num_trusted_hops ?? 0) !== 0) fail("xff_num_trusted_hops");
    this.normalizePath = this.hcm.normalize_path === true;
    this.mergeSlashes = this.hcm.merge_slashes === true;
    const escaped = this.hcm.path_with_escaped_slashes_action;
    if (escaped !== "UNESCAPE_AND_REDIRECT") fail(`path_with_escaped_slashes_action ${escaped ?? "(default)"}: only UNESCAPE_AND_REDIRECT was checked`);

    const filters: Obj[] = this.hcm.http_filters ?? [];
    const rl = filters.filter((f) => f.typed_config?.["@type"] === TYPE_RATELIMIT);
    if (rl.length !== 1) fail(`expected one ratelimit filter, found ${rl.length}`);
    this.rateLimitFilter = rl[0].typed_config;
    if (this.rateLimitFilter.rate_limits !== undefined) fail("rate_limits in the filter config override the route's");
    if (![undefined, "", "both"].includes(this.rateLimitFilter.request_type)) fail("request_type");
    this.domain = this.rateLimitFilter.domain;
    this.stage = this.rateLimitFilter.stage ?? 0;

    const rc = this.hcm.route_config;
    if (!rc) fail("route_config missing (rds is not modelled)");
    const vhosts: Obj[] = rc.virtual_hosts ?? [];
    if (vhosts.length !== 1 || JSON.stringify(vhosts[0].domains) !== '["*"]') fail("expected one virtual host for *");
    only(vhosts[0], ["name", "domains", "routes"], `virtual host ${vhosts[0].name}`);
    this.routes = (vhosts[0].routes as Obj[]).map((r) => this.compileRoute(r));
  }

  private compileRoute(r: Obj): RouteModel {
    const name = r.name ?? "(unnamed)";
    only(r, ["name", "match", "route"], `route ${name}`);
    only(r.match, ["prefix", "path", "path_separated_prefix", "case_sensitive"], `route ${name} match`);
    const kinds = (["prefix", "path", "path_separated_prefix"] as const).filter((k) => r.match[k] !== undefined);
    if (kinds.length !== 1) fail(`route ${name}: exactly one path matcher expected`);
    only(r.route, ["cluster", "rate_limits"], `route ${name} action`);
    const entries: Action[][] = [];
    for (const rl of (r.route.rate_limits ?? []) as Obj[]) {
      only(rl, ["actions", "stage"], `route ${name} rate_limits entry`);
      if ((rl.stage ?? 0) !== this.stage) continue;
      entries.push((rl.actions as Obj[]).map((a) => compileAction(a, name)));
    }
    return {
      name,
      matcher: { kind: kinds[0], value: r.match[kinds[0]], caseSensitive: r.match.case_sensitive ?? true },
      entries,
    };
  }

  /** What Envoy makes of a request target: the :path it routes on, a redirect, or a refusal. */
  target(raw: string): Target {
    let t = raw;
    const absolute = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(t);
    if (absolute) {
      if (!/^http:/i.test(t)) fail(`target '${raw}': only the http scheme was checked`);
      t = t.slice(absolute[0].length);
      if (t === "") t = "/";
      else if (!t.startsWith("/")) fail(`target '${raw}': an absolute form without a path was not checked`);
    }
    if (/[^\x21-\x7e]/.test(t)) fail(`target '${raw}': characters outside printable ASCII were not checked`);
    if (!t.startsWith("/") || t.includes("#")) return { kind: "rejected" };
    const q = t.indexOf("?");
    let p = q < 0 ? t : t.slice(0, q);
    const query = q < 0 ? "" : t.slice(q);
    // UNESCAPE_AND_REDIRECT (the constructor accepts no other action).
    const redirect = /%2f|%5c/i.test(p);
    if (redirect) p = p.replace(/%2f/gi, "/").replace(/%5c/gi, "\\");
    if (this.normalizePath) p = canonicalPath(p);
    else if (/[%\\]/.test(p)) fail(`target '${raw}': escapes and backslashes without normalize_path were not checked`);
    if (this.mergeSlashes) p = mergeSlashes(p);
    return redirect ? { kind: "redirect", location: p + query } : { kind: "path", path: p + query };
  }

  /** The route Envoy picks for a normalized :path. */
  private routeFor(full: string): RouteModel | undefined {
    const noQuery = full.split("?")[0];
    return this.routes.find(({ matcher: m }) => {
      const fold = (s: string) => (m.caseSensitive ? s : s.toLowerCase());
      const v = fold(m.value);
      if (m.kind === "prefix") return fold(full).startsWith(v);
      if (m.kind === "path") return fold(noQuery) === v;
      const p = fold(noQuery);
      return p === v || p.startsWith(v + "/");
    });
  }

  /** The one ShouldRateLimit call Envoy makes for this request (or none). */
  call(req: HttpRequest): EnvoyCall {
    if (net.isIP(req.clientIp) === 0) throw new Error(`not an IP address: ${req.clientIp}`);
    const target = this.target(req.path);
    if (target.kind === "rejected") return { route: "(none)", reply: { status: 400 } };
    if (target.kind === "redirect") return { route: "(none)", reply: { status: 307, location: target.location } };
    const route = this.routeFor(target.path);
    if (!route) return { route: "(none)", reply: { status: 404 } };
    const headers = new Map<string, string>();
    for (const [k, v] of Object.entries(req.headers ?? {})) {
      const first = [v].flat()[0];
      if (first !== undefined && !headers.has(k.toLowerCase())) headers.set(k.toLowerCase(), first.replace(/^[ \t]+|[ \t]+$/g, ""));
    }
    const descriptors: WireDescriptor[] = [];
    for (const actions of route.entries) {
      const entries: { key: string; value: string }[] = [];
      let dropped = false;
      for (const a of actions) {
        if (a.kind === "remote_address") entries.push({ key: "remote_address", value: req.clientIp });
        else if (a.kind === "generic_key") entries.push({ key: a.key, value: a.value });
        else {
          const v = headers.get(a.header);
          if (v !== undefined) entries.push({ key: a.key, value: v });
          else if (!a.skipIfAbsent) {
            dropped = true;
            break;
          }
        }
      }
      if (!dropped && entries.length > 0) descriptors.push({ entries });
    }
    return {
      route: route.name,
      request: descriptors.length > 0 ? { domain: this.domain, descriptors } : undefined,
      path: target.path,
    };
  }

  /** Descriptors only, as [key, value] lists: the shape the test table writes. */
  descriptors(req: HttpRequest): [string, string][][] {
    return (this.call(req).request?.descriptors ?? []).map((d) => d.entries.map((e) => [e.key, e.value]));
  }

  /** Every descriptor shape the file can send, per route. */
  patterns(): { route: string; entries: EntryPattern[] }[] {
    return this.routes.flatMap((r) =>
      r.entries.map((actions) => ({
        route: r.name,
        entries: actions.map(
          (a): EntryPattern =>
            a.kind === "remote_address" ? { key: "remote_address" } : a.kind === "generic_key" ? { key: a.key, value: a.value } : { key: a.key },
        ),
      })),
    );
  }

  /** A static cluster's single endpoint. */
  clusterAddress(name: string): { address: string; port: number; cluster: Obj } {
    const cluster = (this.raw.static_resources.clusters as Obj[]).find((c) => c.name === name);
    if (!cluster) fail(`no cluster ${name}`);
    const eps = cluster.load_assignment?.endpoints?.flatMap((e: Obj) => e.lb_endpoints) ?? [];
    if (eps.length !== 1) fail(`cluster ${name}: expected one endpoint`);
    const sa = eps[0].endpoint.address.socket_address;
    return { address: sa.address, port: sa.port_value, cluster };
  }
}

function compileAction(a: Obj, route: string): Action {
  const kinds = Object.keys(a);
  if (kinds.length !== 1) fail(`route ${route}: an action must have one kind, got ${kinds.join(", ")}`);
  const kind = kinds[0];
  const body = a[kind] ?? {};
  if (kind === "remote_address") {
    only(body, [], `route ${route} remote_address`);
    return { kind };
  }
  if (kind === "request_headers") {
    only(body, ["header_name", "descriptor_key", "skip_if_absent"], `route ${route} request_headers`);
    return { kind, header: String(body.header_name).toLowerCase(), key: body.descriptor_key, skipIfAbsent: body.skip_if_absent === true };
  }
  if (kind === "generic_key") {
    only(body, ["descriptor_value", "descriptor_key"], `route ${route} generic_key`);
    return { kind, key: body.descriptor_key || "generic_key", value: body.descriptor_value };
  }
  fail(`route ${route}: action '${kind}'`);
}

const UNRESERVED = /^[A-Za-z0-9._~-]$/;
/** Printable ASCII that normalize_path escapes (observed; space and controls cannot be sent). */
const ESCAPED = new Set(['"', "<", ">", "`", "{", "}", "|", "^"]);

/** normalize_path: backslashes, percent-escapes and characters, then dot segments. */
function canonicalPath(p: string): string {
  let out = "";
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    const hex = p.slice(i + 1, i + 3);
    if (c === "\\") out += "/";
    else if (c === "%" && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      const decoded = String.fromCharCode(Number.parseInt(hex, 16));
      out += UNRESERVED.test(decoded) ? decoded : c + hex;
      i += 2;
    } else if (ESCAPED.has(c)) out += `%${c.charCodeAt(0).toString(16).toUpperCase()}`;
    else out += c;
  }
  return removeDotSegments(out);
}

/** merge_slashes as Envoy does it: the non-empty segments, with the leading and a trailing "/" kept. */
function mergeSlashes(p: string): string {
  if (!p.includes("//")) return p;
  return (p.startsWith("/") ? "/" : "") + p.split("/").filter(Boolean).join("/") + (p.endsWith("/") ? "/" : "");
}

/** RFC 3986 section 5.2.4. */
function removeDotSegments(input: string): string {
  const out: string[] = [];
  const segments = input.split("/");
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i];
    const last = i === segments.length - 1;
    if (s === ".") {
      if (last) out.push("");
    } else if (s === "..") {
      if (out.length > 1) out.pop();
      if (last) out.push("");
    } else out.push(s);
  }
  return out.join("/") || "/";
}
