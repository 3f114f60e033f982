// `sluice serve`: stop signals, the worker group, and the life of one serving process: build (serve-build.ts),
// start (the admin and reference ports, the store, the gRPC server, rule reloads), and the stop, all closed
// through one list of closers (closers.ts).
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { Limiter } from "../limiter/limiter.js";
import type { SecretValues } from "../core/secret.js";
import { ruleCounts } from "../rules/watch.js";
import { healthRoutes, type AdminHandler, type Readiness, type RunningAdminServer } from "../server/admin/admin.js";
import { startAdminPort } from "../server/admin/admin-port.js";
import { ListenError, logListenError } from "../server/admin/listen-error.js";
import type { CallObserver, RunningTransport } from "../server/grpc/grpc-contract.js";
import { startH2Server } from "../server/grpc/h2/server.js";
import { RlqsService } from "../rlqs/service.js";
import { setHeapGrowth } from "./heap-growth.js";
import { collectBeforeServing } from "./startup-gc.js";
import { announceListening, isWorker, runPrimary, useReusePort, workerPort, type WorkerGroup } from "../server/workers/workers.js";
import { answerGroup, NOT_LISTENING, startGroupServices } from "../server/workers/group-admin.js";
import type { Settings } from "../settings/settings.js";
import { RULES_ONLY_ERROR, rlqsJson, rulesJson, rulesOnly } from "../inspect/rules-json.js";
import { refusalLogger } from "../telemetry/decision-log.js";
import { rlqsMetrics } from "../telemetry/rlqs-metrics.js";
import type { Metrics } from "../telemetry/metrics.js";
import { withDeadline } from "../store/deadline.js";
import { reportReferenceEnv } from "../settings/reference/report.js";
import { ReferenceHealth } from "../server/reference/http-health.js";
import { servingFollowsStore } from "../server/grpc/grpc-health-store.js";
import { startReferenceListeners, type RunningReferenceListeners } from "../server/reference/http-listeners.js";
import { serviceLogger } from "../telemetry/logger.js";
import { Closers } from "./closers.js";
import { catchStopSignals, stopRequested, untilStopped } from "./stop-signals.js";
import { RefusalSummaries } from "../insight/refusal-summaries.js";
import { withRefusals } from "../insight/observer.js";
import { insightRoutes, refusedClientsGauge } from "../insight/routes.js";
import { build, STORE_CLOSE_MS, type Built } from "./serve-build.js";

export async function serve(settings: Settings): Promise<number> {
  catchStopSignals(); // bin.ts did already, unless cli/main.js was started directly
  setHeapGrowth(settings.heapGrowingPercent);
  const logger = serviceLogger(settings.logLevel, settings.logFormat);
  // Stopped while sluice's modules loaded: nothing was opened.
  const early = stopRequested();
  if (early) return stoppedBeforeServing(logger, early);
  if (!isWorker()) reportReferenceEnv(logger, settings);
  const reusePort = settings.workers > 1 && useReusePort();
  if (settings.workers > 1 && !isWorker()) {
    const { workers, host, port, shutdownGraceMs, drainDelayMs } = settings;
    // The primary serves the HTTP ports for the whole group (group-admin.ts); workers answer it.
    const services = (group: WorkerGroup) => startGroupServices({ ...settings, logger }, group);
    return runPrimary({
      workers,
      host,
      port,
      shutdownGraceMs,
      drainDelayMs,
      reusePort,
      grpcSetting: settings.listenSettings.grpc,
      logger,
      services,
      stop: { requested: stopRequested, signal: untilStopped() },
    });
  }
  const s = { ...settings, port: workerPort(settings.port) };
  const closers = new Closers(logger);
  const starting = (async () => {
    const built = await build(s, logger, closers);
    if (!built || stopRequested()) return undefined;
    logger.debug({ ms: Math.round(collectBeforeServing()) }, "full collection before serving");
    return await start(built, s, reusePort, logger, closers);
  })();
  let running: Running | undefined;
  try {
    // A stop during the start does not wait for it: what is open closes now, which ends the start's waits.
    running = await Promise.race([starting, untilStopped().then(() => undefined)]);
  } catch (err) {
    await closers.closeAll(s.shutdownGraceMs);
    throw err;
  }
  const signal = stopRequested();
  if (signal) {
    logger.info({ signal, graceMs: s.shutdownGraceMs }, "shutting down");
    if (running) running.ready.value = false;
    await closers.closeAll(s.shutdownGraceMs);
    // The start's own steps end (bounded), then whatever they opened meanwhile is closed too.
    if (!running) await withDeadline(starting, s.shutdownGraceMs).catch(() => undefined);
    await closers.closeAll(s.shutdownGraceMs);
    logger.info("stopped");
    return 0;
  }
  // A start that failed has said why; what it had opened is closed.
  if (!running) {
    await closers.closeAll(s.shutdownGraceMs);
    return 1;
  }
  const stoppedBy = await untilSignal(() => announceListening(logger, running.listening));
  logger.info({ signal: stoppedBy, drainDelayMs: s.drainDelayMs, graceMs: s.shutdownGraceMs }, "shutting down");
  // Unready first (probes and health checkers see it), then the rest in reverse: the gRPC drain first.
  running.ready.value = false;
  running.notServing();
  if (s.drainDelayMs > 0) {
    // Calls are still served: a health checker (Envoy's) takes this instance out of rotation meanwhile,
    // so that no new call meets the GOAWAY and the closed port that follow.
    await sleep(s.drainDelayMs);
    logger.info({ graceMs: s.shutdownGraceMs }, "draining");
  }
  await closers.closeAll(s.shutdownGraceMs);
  logger.info("stopped");
  return 0;
}

function stoppedBeforeServing(logger: Logger, signal: string): number {
  logger.info({ signal }, "shutting down");
  logger.info("stopped");
  return 0;
}

/** Once SIGTERM or SIGINT arrives (stop-signals.ts): its name. `listening` is said once both are handled. */
function untilSignal(listening: () => void): Promise<string> {
  const stopped = untilStopped();
  // Only now: whoever reads this line may stop sluice at once (logs are written synchronously).
  listening();
  return stopped;
}

interface Running {
  /** Ready once the gRPC server serves, until shutdown starts. */
  ready: { value: boolean };
  /** gRPC health turns NOT_SERVING (calls are still served). */
  notServing(): void;
  listening: Record<string, unknown>;
}

/** The admin and reference ports, the store, then the gRPC server and rule reloads; undefined when a port cannot be had (said in the log). */
async function start(b: Built, s: Settings, reusePort: boolean, logger: Logger, closers: Closers): Promise<Running | undefined> {
  const { metrics, source, store, limiter, tls, tracing, loadedAt, secrets } = b;
  // The store's state is shown, not required: a store that is down is the failure policy's business, and all replicas share it.
  const ready = { value: false };
  const readiness = (): Readiness => ({
    ready: ready.value,
    rules: { domains: ruleCounts(limiter.getRules()), loadedAt, ...source.state() },
    store: store.status(),
  });
  // Who is being limited (/top, /ui): refusals summarised here, sent to the store once a second.
  const refusals =
    s.topSummaries && RefusalSummaries.supported(store)
      ? new RefusalSummaries({
          store,
          keyPrefix: s.keyPrefix,
          secretKeys: s.topSecretKeys,
          hashKey: s.topHashKey.reveal(),
          rulePath: (l) => secrets.path(l),
          onError: (err) => logger.debug({ err }, "refusal summaries not sent"),
        })
      : undefined;
  if (refusals)
    refusedClientsGauge(
      metrics.registry,
      store,
      s.keyPrefix,
      () => limiter.getRules(),
      (l) => secrets.path(l),
    );
  // Closed before the store: its last batch goes out while the store still takes it.
  if (refusals) closers.add("refusal summaries", () => withDeadline(refusals.close(), STORE_CLOSE_MS).catch(() => undefined));
  const insight = insightRoutes({
    store,
    keyPrefix: s.keyPrefix,
    rules: () => limiter.getRules(),
    referenceKeys: s.referenceKeys !== undefined,
    logger,
    secrets,
  });
  // Envoy's rate_limit_quota filter (RLQS) on the same port: assignments are leases from the same counters.
  // Requests Envoy reports denying count in /top as refusals of the bucket's limit (one weighted step per report and bucket).
  const rlqs = new RlqsService({
    store,
    fallback: limiter.fallback,
    rules: () => limiter.getRules(),
    keyPrefix: s.keyPrefix,
    logger,
    onDenied: refusals ? (domain, limit, entries, denied) => refusals.refused(domain, limit, entries, denied) : undefined,
  });
  rlqsMetrics(metrics.registry, () => rlqs.counters);
  const adminRoutes = { ...healthRoutes(readiness), ...opsRoutes(metrics, limiter, rlqs), ...insight };
  let admin: RunningAdminServer;
  try {
    admin = isWorker() ? NOT_LISTENING : await startAdminPort({ ...s, routes: adminRoutes, logger });
  } catch (err) {
    return listenFailed(logger, err);
  }
  closers.add("admin port", () => admin.close());
  // The reference's HTTP, debug and Prometheus ports, where its variables ask for them.
  const observer = withRefusals(callObserver(metrics, logger, secrets), refusals);
  const health = new ReferenceHealth(
    { serving: () => ready.value, domains: () => limiter.getRules().domains.size, store: () => store.status() },
    s.healthCheck,
  );
  // With --workers the primary serves the HTTP ports for the group and asks this worker (group-admin.ts).
  if (isWorker()) answerGroup({ ...s, metrics, readiness, limiter, health, observer, routes: insight, rlqs, logger });
  let reference: RunningReferenceListeners;
  try {
    reference = isWorker()
      ? NOT_LISTENING
      : await startReferenceListeners({
          ...s,
          limiter,
          health,
          metrics: adminRoutes["/metrics"],
          stats: async () => (await import("../telemetry/statsd.js")).referenceStatTotals(metrics),
          maxBodyBytes: s.maxMessageBytes,
          observer,
          logger,
        });
  } catch (err) {
    return listenFailed(logger, err);
  }
  closers.add("reference ports", () => reference.close());

  await store.start();
  refusals?.start();
  health.observe();
  let grpcServer: RunningTransport;
  try {
    grpcServer = await startH2Server(limiter, {
      host: s.host,
      port: s.port,
      reusePort,
      bounds: s.bounds,
      maxMessageBytes: s.maxMessageBytes,
      maxConcurrentStreams: s.maxConcurrentStreams,
      maxConnectionAge: s.maxConnectionAge,
      maxConnections: s.maxConnections,
      onCut: (scope, reason) => metrics.cut(scope, reason),
      logger,
      tls,
      observer,
      tracing,
      streams: [rlqs],
    });
  } catch (err) {
    // A port taken (or not ours to bind): said as the admin port's is, and nothing left running.
    return listenFailed(logger, new ListenError(err as Error, s.host, s.port, s.listenSettings.grpc));
  }
  // Closed first: in-flight calls are answered within the grace period before anything they use closes.
  closers.add("gRPC server", async (left) => {
    const drained = await grpcServer.shutdown(left());
    if (!drained) logger.warn({ graceMs: s.shutdownGraceMs }, "in-flight calls outlived the grace period and were cancelled");
  });
  if (s.healthCheck.storeConnected) {
    const stop = servingFollowsStore(
      () => store.status(),
      (serving) => grpcServer.setServing(serving),
      logger,
    );
    closers.add("gRPC health", () => stop());
  } else {
    grpcServer.setServing(true);
  }
  ready.value = true;
  source.start();
  const listening = {
    port: grpcServer.port,
    host: s.host,
    ...(isWorker() ? {} : { adminPort: admin.port, adminHost: s.adminHost }),
    store: store.name,
    tls: tls?.mode ?? "off",
    ...reference.ports,
  };
  return { ready, notServing: () => grpcServer.setServing(false), listening };
}

/** A port that could not be had: one line naming the setting that moves it (anything else is not a port's failure). */
function listenFailed(logger: Logger, err: unknown): undefined {
  if (!(err instanceof ListenError)) throw err;
  logListenError(logger, err);
  return undefined;
}

/** Metrics for every call; at debug level also a line per refused request. */
function callObserver(metrics: Metrics, logger: Logger, secrets: SecretValues): CallObserver {
  const logRefusal = refusalLogger(logger, secrets);
  if (!logRefusal) return metrics;
  return {
    decided(req, decision, seconds) {
      metrics.decided(req, decision, seconds);
      logRefusal(req, decision);
    },
    failed: (code, seconds) => metrics.failed(code, seconds),
  };
}

/** GET /metrics (Prometheus text) and GET /rules (the rules in force, with file and line; `?only=rlqs`: the RLQS buckets alone). */
function opsRoutes(metrics: Metrics, limiter: Limiter, rlqs: RlqsService): Record<string, AdminHandler> {
  return {
    "/metrics": async () => ({ status: 200, body: await metrics.text(), contentType: metrics.contentType }),
    "/rules": (q) => {
      const only = rulesOnly(q);
      if (only === undefined) return { status: 400, body: RULES_ONLY_ERROR };
      if (only === "all") return { status: 200, body: rulesJson(limiter.getRules(), rlqs) };
      const buckets = rlqsJson(rlqs);
      return { status: 200, body: buckets ? { rlqs: buckets } : {} };
    },
  };
}
