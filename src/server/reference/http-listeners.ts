// The reference's HTTP listeners, each opened only when its variables are used (docs/configuration.md "Reference
// environment variables"): the HTTP port (HOST/PORT: /healthcheck, /json), the debug port
// (DEBUG_HOST/DEBUG_PORT: /rlconfig, /stats, pprof's paths) and Prometheus (USE_PROMETHEUS: PROMETHEUS_ADDR,
// PROMETHEUS_PATH). They face the network, so they serve what the reference serves there and nothing more:
// sluice's own routes (/top, /ui, /explain, /rules, /readyz) are on its admin port only; /metrics there and,
// with USE_PROMETHEUS, on the Prometheus port, as the reference serves its metrics.
import type { Logger } from "pino";
import type { Limiter } from "../../limiter/limiter.js";
import { startAdminServer, type AdminHandler, type BodyRoute, type RunningAdminServer } from "../admin/admin.js";
import type { ListenSetting } from "../admin/listen-error.js";
import type { RequestBounds } from "../grpc/decode.js";
import { debugRoutes, rlconfigRoute, statsRoute } from "./http-debug.js";
import type { ReferenceHealth } from "./http-health.js";
import { jsonRoute } from "./http-json.js";
import type { CallObserver } from "../grpc/grpc-contract.js";

/** A host and port to listen on (the reference's HTTP, debug and Prometheus ports). */
export interface HttpListener {
  host: string;
  port: number;
}

/** What each port serves: built from one process's limiter, or given (the primary of --workers, group-admin.ts). */
interface ReferenceRoutes {
  http: Record<string, AdminHandler | BodyRoute>;
  debug: Record<string, AdminHandler>;
  metrics: AdminHandler;
}

interface ProcessSources {
  limiter: Limiter;
  health: ReferenceHealth;
  metrics: AdminHandler;
  /** /stats: counter totals under the reference's stat names. */
  stats: () => Promise<Map<string, number>>;
  bounds: RequestBounds;
  maxBodyBytes: number;
  observer?: CallObserver;
}

type ReferenceListenerOptions = {
  referenceHttp?: HttpListener;
  referenceDebug?: HttpListener;
  prometheus?: HttpListener & { path: string };
  logger: Logger;
} & ({ routes: ReferenceRoutes } | ProcessSources);

function processRoutes(o: ProcessSources & { logger: Logger }): ReferenceRoutes {
  const json = jsonRoute({ limiter: o.limiter, bounds: o.bounds, maxBodyBytes: o.maxBodyBytes, observer: o.observer, logger: o.logger });
  return {
    http: { "/healthcheck": o.health.route(), "/json": json },
    debug: debugRoutes(
      rlconfigRoute(() => o.limiter.getRules()),
      statsRoute(o.stats),
    ),
    metrics: o.metrics,
  };
}

export interface RunningReferenceListeners {
  /** httpPort, debugPort, prometheusPort: for those opened (the `listening` log line shows them). */
  ports: Record<string, number>;
  close(): Promise<void>;
}

/** These ports face the network (0.0.0.0 by default): connections are bounded. */
const MAX_CONNECTIONS = 1024;

/** Each port as the operator moves it (the reference's variables). */
const SETTINGS: Record<"httpPort" | "debugPort" | "prometheusPort", ListenSetting> = {
  httpPort: { what: "the reference's HTTP port (/healthcheck, /json)", port: "PORT", host: "HOST" },
  debugPort: { what: "the reference's debug port (/rlconfig, /stats)", port: "DEBUG_PORT", host: "DEBUG_HOST" },
  prometheusPort: { what: "the Prometheus port (USE_PROMETHEUS)", port: "PROMETHEUS_ADDR", host: "PROMETHEUS_ADDR" },
};

export async function startReferenceListeners(o: ReferenceListenerOptions): Promise<RunningReferenceListeners> {
  const running: RunningAdminServer[] = [];
  const ports: Record<string, number> = {};
  const open = async (name: keyof typeof SETTINGS, at: HttpListener, routes: Parameters<typeof startAdminServer>[0]["routes"]) => {
    const setting = SETTINGS[name];
    const server = await startAdminServer({ host: at.host, port: at.port, routes, logger: o.logger, maxConnections: MAX_CONNECTIONS, setting });
    running.push(server);
    ports[name] = server.port;
  };
  const close = async () => {
    await Promise.all(running.map((s) => s.close()));
  };
  try {
    if (!o.referenceHttp && !o.referenceDebug && !o.prometheus) return { ports, close };
    const routes = "routes" in o ? o.routes : processRoutes(o);
    if (o.referenceHttp) await open("httpPort", o.referenceHttp, routes.http);
    if (o.referenceDebug) await open("debugPort", o.referenceDebug, routes.debug);
    if (o.prometheus) await open("prometheusPort", o.prometheus, { [o.prometheus.path]: routes.metrics });
  } catch (err) {
    await close();
    throw err;
  }
  return { ports, close };
}
