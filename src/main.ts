#!/usr/bin/env -S node --max-semi-space-size=16
// CLI: sluice serve | check | explain | top. Builds Settings -> Store -> Limiter -> servers; nothing else lives here.
// The shebang's V8 flag is sluice's memory setting, the same in `npm start` and the Docker image (README
// "Memory"): Node 24's default young generation grows to 2 x 64 MiB under load and keeps that RSS.
import path from "node:path";
import type { Logger } from "pino";
import { Limiter } from "./limiter/limiter.js";
import { loadRuleDir, type LoadResult } from "./rules/load.js";
import { formatRuleError, type RuleSet } from "./rules/model.js";
import { keyScanPattern } from "./limiter/keys.js";
import { ruleCounts } from "./rules/watch.js";
import { footprint, footprintLine } from "./inspect/footprint.js";
import { DirectorySource, type RuleSource, type RuleSourceOptions } from "./rules/source.js";
import { healthRoutes, startAdminServer, type AdminHandler, type Readiness, type RunningAdminServer } from "./server/admin.js";
import type { CallObserver, RunningTransport } from "./server/transport.js";
import { transportByName } from "./server/transports.js";
import { serverTls, TlsConfigError, type ServerTls } from "./server/tls.js";
import { announceListening, isWorker, runPrimary, useReusePort, workerPort, type WorkerGroup } from "./server/workers.js";
import { answerGroup, NOT_LISTENING, startGroupServices } from "./server/group-admin.js";
import {
  CHECK_FLAGS,
  COMMAND_FLAGS,
  EXPLAIN_FLAGS,
  TOP_FLAGS,
  parseFlags,
  ruleDirSettings,
  SERVE_FLAGS,
  serveSettings,
  UsageError,
  type Settings,
} from "./settings.js";
import { commandHelp, topHelp, USAGE, version } from "./usage.js";
import { ALLOW_EMPTY_HINT, refuseEmptyRuleDir } from "./rules/empty-dir.js";
import { logLoadProblems } from "./telemetry/rule-log.js";
import { explainCommand } from "./inspect/explain-command.js";
import { rulesJson } from "./inspect/rules-json.js";
import { refusalLogger } from "./telemetry/decision-log.js";
import { Leases } from "./approximate/leases.js";
import { hasApproximateLimits } from "./approximate/in-rules.js";
import { approximateMetrics } from "./telemetry/approximate-metrics.js";
import { Metrics } from "./telemetry/metrics.js";
import { withDeadline } from "./store/deadline.js";
import { reportReferenceEnv } from "./compat/report.js";
import { referenceMetadata } from "./server/reference-metadata.js";
import { ReferenceHealth } from "./server/http-health.js";
import { startReferenceListeners, type RunningReferenceListeners } from "./server/http-listeners.js";
import { serviceLogger } from "./telemetry/logger.js";
import { MemoryStore } from "./store/memory.js";
import { RedisOptionsError } from "./store/redis-options.js";
import { perSecondNodeId, SplitByUnitStore } from "./store/split-by-unit.js";
import type { Store } from "./store/store.js";
import type { Tracing } from "./telemetry/tracing.js";
import type { TracingSettings } from "./telemetry/tracing-settings.js";
import { RefusalSummaries } from "./insight/refusals.js";
import { withRefusals } from "./insight/observer.js";
import { topCommand } from "./insight/top-command.js";
import { insightRoutes, refusedClientsGauge } from "./insight/routes.js";

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === "serve") {
      if (parseFlags(SERVE_FLAGS, rest).values.help) return help(commandHelp("serve"));
      return await serve(serveSettings(rest, process.env, process.stdout.isTTY === true));
    }
    if (command === "check") return check(rest);
    if (command === "explain") {
      if (parseFlags(EXPLAIN_FLAGS, rest).values.help) return help(commandHelp("explain"));
      return explainCommand(rest, process.env, process.stdout, process.stderr);
    }
    if (command === "top") {
      if (parseFlags(TOP_FLAGS, rest).values.help) return help(commandHelp("top"));
      return await topCommand(rest, process.stdout, process.stderr);
    }
    if (command === "help" || command === "--help" || command === "-h") {
      const topic = rest[0];
      if (topic === undefined) return help(topHelp());
      if (rest.length === 1 && topic in COMMAND_FLAGS) return help(commandHelp(topic));
      throw new UsageError(`no help on '${rest.join(" ")}'`);
    }
    if ((command === "--version" || command === "version") && rest.length === 0) return help(version() + "\n");
    throw new UsageError(command ? `unknown command '${command}'` : "no command given");
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`sluice: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    throw err;
  }
}

function help(text: string): number {
  process.stdout.write(text);
  return 0;
}

function check(args: string[]): number {
  const { values, positionals } = parseFlags(CHECK_FLAGS, args, true);
  if (values.help) return help(commandHelp("check"));
  if (positionals.length > 1) throw new UsageError("check takes one directory");
  if (positionals.length === 1 && values.config !== undefined) throw new UsageError("give the rule directory once: DIR or --config DIR");
  const { configDir: dir, mergeDomains, failureMode, allowEmptyRules } = ruleDirSettings({ ...values, config: positionals[0] ?? values.config }, process.env);
  const result = refuseEmptyRuleDir(dir, loadRuleDir(dir, { mergeDomains, failureMode }), allowEmptyRules);
  for (const w of result.warnings) process.stderr.write(`warning: ${w}\n`);
  if (!result.rules) {
    for (const e of result.errors) process.stderr.write(formatRuleError(e) + "\n");
    return 1;
  }
  process.stdout.write("ok\n");
  for (const line of summarize(result.rules)) process.stdout.write(line + "\n");
  if (result.rules.domains.size > 0) process.stdout.write(footprintLine(footprint(result.rules)) + "\n");
  return 0;
}

function summarize(rules: RuleSet): string[] {
  return [...rules.domains.values()].map(
    (d) => `domain ${d.domain}: ${d.ruleCount} limit${d.ruleCount === 1 ? "" : "s"} from ${d.files.map((f) => path.basename(f)).join(", ")}`,
  );
}

async function serve(settings: Settings): Promise<number> {
  const logger = serviceLogger(settings.logLevel, settings.logFormat);
  if (!isWorker()) reportReferenceEnv(logger, settings);
  const reusePort = settings.workers > 1 && useReusePort(transportByName(settings.transport).reusePort);
  if (settings.workers > 1 && !isWorker()) {
    const { workers, host, port, shutdownGraceMs } = settings;
    // The primary serves the HTTP ports for the whole group (group-admin.ts); workers answer it.
    const services = (group: WorkerGroup) => startGroupServices({ ...settings, logger }, group);
    return runPrimary({ workers, host, port, shutdownGraceMs, reusePort, logger, services });
  }
  const s = { ...settings, port: workerPort(settings.port) };
  // Sources are read at scrape time, after store and limiter exist.
  const metrics: Metrics = new Metrics(
    { rules: () => limiter.getRules(), store: () => store.status(), denyNotes: () => limiter.denyNoteCount },
    { detailedValuesPerRule: s.detailedMetricMaxValues, statKeys: s.statsd !== undefined, nearLimitRatio: s.nearLimitRatio },
  );
  const source = await ruleSource(s, metrics, {
    load: { mergeDomains: s.mergeDomains, failureMode: s.failureMode },
    logger,
    // Called back only after source.start(), when limiter exists.
    onLoad: (result) => {
      const before = limiter.getRules();
      applyReload(result, limiter, source.origin, logger);
      metrics.configLoaded(result.rules, before, result.stats);
    },
  });
  const loaded = await source.first(s.forceStartWithoutRules);
  logLoadProblems(logger, source.origin, loaded);
  if (!loaded.rules) {
    if (loaded.errors.length > 0) logger.error({ ...source.origin, errors: loaded.errors.length }, "rules failed to load");
    if (!s.forceStartWithoutRules) return 1;
    logger.warn(source.origin, "serving with no rules until valid rules arrive (FORCE_START_WITHOUT_INITIAL_CONFIG)");
  }
  const initialRules: RuleSet = loaded.rules ?? { domains: new Map() };
  if (loaded.rules) logger.info({ ...source.origin, domains: ruleCounts(loaded.rules), ...loadCost(loaded) }, "rules loaded");
  const loadedAt = new Date().toISOString();

  // No rules yet because none arrived (xDS with FORCE_START) is not a failed load.
  if (loaded.rules || loaded.errors.length > 0) metrics.configLoaded(loaded.rules, undefined, loaded.stats);
  const statsd = s.statsd ? new (await import("./telemetry/statsd.js")).StatsdSink(metrics, s.statsd, logger) : undefined;
  const tracing = s.tracing ? await startTracing(s.tracing, logger) : undefined;
  if (Object.keys(s.metricLabels).length > 0) metrics.registry.setDefaultLabels(s.metricLabels); // EXTRA_TAGS
  let store: Store;
  let tls: ServerTls | undefined;
  try {
    store = await makeStore(s, logger, metrics, tracing);
    tls = s.tls ? serverTls(s.tls, logger) : undefined;
  } catch (err) {
    // Configuration that cannot work: the message names the file, never a secret.
    if (err instanceof RedisOptionsError || err instanceof TlsConfigError) throw new UsageError(err.message);
    throw err;
  }
  // Approximate limits take leases from a remote store; in front of one that counts in this process they are exact.
  const approximate: Leases | undefined = store.lease
    ? new Leases(store as Store & Required<Pick<Store, "lease">>, {
        maxKeys: s.approximateMaxKeys,
        onCall: approximateMetrics(metrics.registry, () => approximate),
      })
    : undefined;
  const limiter: Limiter = new Limiter(initialRules, store, {
    approximate,
    // The note saves a remote call; in front of the embedded memory store it would only add a copy.
    denyNoteMaxEntries: store.inProcess ? 0 : s.denyNoteMax,
    denyNoteMaxMs: s.denyNoteMaxMs,
    fallback: new MemoryStore({ maxKeys: s.localMaxKeys }),
    keyPrefix: s.keyPrefix,
    globalShadowMode: s.globalShadowMode,
    globalQuotaMode: s.globalQuotaMode,
    referenceKeys: s.referenceKeys,
    responseHeaders: s.responseHeaders.enabled ? s.responseHeaders : undefined,
    responseMetadata: s.responseMetadata,
    referenceMetadata,
  });
  if (!approximate && hasApproximateLimits(initialRules)) logger.info("approximate limits are decided exactly: the store counts in this process");
  if (s.keyPrefix !== "") logger.info({ keyPrefix: s.keyPrefix, keys: keyScanPattern(s.keyPrefix) }, "store keys carry a prefix");
  // Ready once the gRPC server serves, until shutdown starts. The store's state is shown, not required:
  // a store that is down is the failure policy's business, and all replicas share it.
  let ready = false;
  const readiness = (): Readiness => ({
    ready,
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
          onError: (err) => logger.debug({ err }, "refusal summaries not sent"),
        })
      : undefined;
  if (refusals) refusedClientsGauge(metrics.registry, store, s.keyPrefix, () => limiter.getRules());
  const insight = insightRoutes({ store, keyPrefix: s.keyPrefix, rules: () => limiter.getRules(), referenceKeys: s.referenceKeys !== undefined });
  const adminRoutes = { ...healthRoutes(readiness), ...opsRoutes(metrics, limiter), ...insight };
  let admin: RunningAdminServer;
  try {
    // Under the reference's environment (without --admin-port) the admin routes are on its HTTP port instead.
    admin = isWorker() || s.adminOnHttpPort ? NOT_LISTENING : await startAdminServer({ host: s.adminHost, port: s.adminPort, routes: adminRoutes, logger });
  } catch (err) {
    logger.error({ err, host: s.adminHost, port: s.adminPort }, "cannot listen on the admin port");
    return 1;
  }
  // The reference's HTTP, debug and Prometheus ports, where its variables ask for them.
  const observer = withRefusals(callObserver(metrics, logger), refusals);
  const health = new ReferenceHealth({ serving: () => ready, domains: () => limiter.getRules().domains.size, store: () => store.status() }, s.healthCheck);
  // With --workers the primary serves the HTTP ports for the group and asks this worker (group-admin.ts).
  if (isWorker()) answerGroup({ ...s, metrics, readiness, limiter, health, observer, routes: insight, logger });
  let reference: RunningReferenceListeners;
  try {
    reference = isWorker()
      ? NOT_LISTENING
      : await startReferenceListeners({
          ...s,
          limiter,
          health,
          metrics: adminRoutes["/metrics"],
          stats: async () => (await import("./telemetry/statsd.js")).referenceStatTotals(metrics),
          admin: s.adminOnHttpPort ? adminRoutes : undefined,
          maxBodyBytes: s.maxMessageBytes,
          observer,
          logger,
        });
  } catch (err) {
    logger.error({ err }, "cannot listen on a port of envoyproxy/ratelimit's settings");
    await admin.close();
    return 1;
  }

  await store.start();
  refusals?.start();
  health.observe();
  let grpcServer: RunningTransport;
  try {
    grpcServer = await transportByName(s.transport).start(limiter, {
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
    });
  } catch (err) {
    // A port taken (or not ours to bind): said as the admin port's is, and nothing left running.
    logger.error({ err, host: s.host, port: s.port }, "cannot listen on the gRPC port");
    source.close();
    await admin.close();
    await reference.close();
    tls?.close();
    if (statsd) await withDeadline(statsd.close(), STATSD_CLOSE_MS).catch(() => undefined);
    if (tracing) await withDeadline(tracing.close(), STATSD_CLOSE_MS).catch(() => undefined);
    metrics.close();
    await approximate?.close();
    await withDeadline(store.close(), STORE_CLOSE_MS).catch(() => undefined);
    return 1;
  }
  grpcServer.setServing(true);
  ready = true;
  source.start();
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = async (signal: string): Promise<number> => {
      // Order: unready first (probes and health watchers see it), then drain gRPC, then the rest.
      ready = false;
      const graceEnds = performance.now() + s.shutdownGraceMs;
      logger.info({ signal, graceMs: s.shutdownGraceMs }, "shutting down");
      source.close();
      const drained = await grpcServer.shutdown(s.shutdownGraceMs);
      if (!drained) logger.warn({ graceMs: s.shutdownGraceMs }, "in-flight calls outlived the grace period and were cancelled");
      // After the drain: approximate limits' unused lease units go back to the store within what is left of the grace.
      if (approximate) {
        const left = await approximate.close(Math.max(100, graceEnds - performance.now()));
        if (left > 0) logger.warn({ units: left }, "approximate limits: unused lease units not given back before shutdown (held until their window ends)");
      }
      await admin.close();
      await reference.close();
      tls?.close();
      // After the drain: the last calls' counts go out in the final flush.
      if (statsd) await withDeadline(statsd.close(), STATSD_CLOSE_MS).catch(() => logger.warn("statsd: the last flush did not finish"));
      metrics.close();
      // The last spans are exported within what is left of the grace period.
      if (tracing)
        await withDeadline(tracing.close(), Math.max(0, graceEnds - performance.now())).catch(() =>
          logger.warn("tracing: the last spans were not all exported"),
        );
      if (refusals) await withDeadline(refusals.close(), STORE_CLOSE_MS).catch(() => undefined);
      await withDeadline(store.close(), STORE_CLOSE_MS).catch(() => undefined);
      logger.info("stopped");
      return 0;
    };
    const onSignal = (signal: string) => {
      if (stopping) return;
      stopping = true;
      stop(signal).then(resolve, (err) => {
        logger.error({ err }, "shutdown failed");
        resolve(1);
      });
    };
    process.once("SIGTERM", () => onSignal("SIGTERM"));
    process.once("SIGINT", () => onSignal("SIGINT"));
    // Only now: whoever reads this line may stop sluice at once (logs are written synchronously).
    announceListening(logger, {
      port: grpcServer.port,
      host: s.host,
      ...(s.adminOnHttpPort ? {} : { adminPort: admin.port, adminHost: s.adminHost }),
      store: store.name,
      tls: tls?.mode ?? "off",
      ...reference.ports,
    });
  });
}

/** The rule directory, or the xDS server when one is configured (--config-xds, CONFIG_TYPE=GRPC_XDS_SOTW). */
async function ruleSource(s: Settings, metrics: Metrics, o: RuleSourceOptions): Promise<RuleSource> {
  // The xDS client (grpc-js) and, below, ioredis and statsd are loaded only when configured (idle memory).
  if (s.configXds) {
    const { XdsRuleSource } = await import("./xds/rule-source.js");
    return new XdsRuleSource(s.configXds, { ...o, observer: metrics.xdsObserver(), allowEmpty: s.allowEmptyRules });
  }
  // Where the directory came from the reference's RUNTIME_* variables, its own way to start without rules is named too.
  const hint = s.runtimeLayout ? `${ALLOW_EMPTY_HINT}; FORCE_START_WITHOUT_INITIAL_CONFIG=true starts too` : ALLOW_EMPTY_HINT;
  return new DirectorySource(s.configDir, s.reloadIntervalMs, o, { allow: s.allowEmptyRules, hint });
}

/** Changed rules: swap valid ones in (counters live in the store and stay), or keep the old ones. */
function applyReload(result: LoadResult, limiter: Limiter, origin: Record<string, string>, logger: Logger): void {
  logLoadProblems(logger, origin, result);
  if (result.rules) {
    limiter.setRules(result.rules);
    logger.info({ ...origin, domains: ruleCounts(result.rules), ...loadCost(result) }, "rules reloaded");
    return;
  }
  logger.error({ ...origin, errors: result.errors.length }, "rules not reloaded: the last good rules keep serving");
}

/** A load's cost for its log line: wall time, and the event loop's part (all of it, and its longest step). */
function loadCost(r: LoadResult): Record<string, number> {
  if (!r.stats) return {};
  const ms = (v: number) => Math.round(v * 10) / 10;
  return { loadMs: ms(r.stats.durationMs), mainThreadMs: ms(r.stats.mainThreadMs), longestStepMs: ms(r.stats.longestStepMs), parsedFiles: r.stats.parsed };
}

/** Metrics for every call; at debug level also a line per refused request. */
function callObserver(metrics: Metrics, logger: Logger): CallObserver {
  const logRefusal = refusalLogger(logger);
  if (!logRefusal) return metrics;
  return {
    decided(req, decision, seconds) {
      metrics.decided(req, decision, seconds);
      logRefusal(req, decision);
    },
    failed: (code, seconds) => metrics.failed(code, seconds),
  };
}

/** GET /metrics (Prometheus text) and GET /rules (the rules in force, with file and line). */
function opsRoutes(metrics: Metrics, limiter: Limiter): Record<string, AdminHandler> {
  return {
    "/metrics": async () => ({ status: 200, body: await metrics.text(), contentType: metrics.contentType }),
    "/rules": () => ({ status: 200, body: rulesJson(limiter.getRules()) }),
  };
}

/** OpenTelemetry's SDK and exporters are loaded only when tracing is on: off, the process holds none of it. */
async function startTracing(t: TracingSettings, logger: Logger): Promise<Tracing> {
  const [{ Tracing }, { otlpExporter }] = await Promise.all([import("./telemetry/tracing.js"), import("./telemetry/tracing-exporter.js")]);
  return new Tracing(t, otlpExporter(t), logger);
}

/** Closing the store must not hold the exit: a hung connection is dropped with the process. */
const STORE_CLOSE_MS = 2000;
/** The statsd sink's last flush at shutdown. */
const STATSD_CLOSE_MS = 2000;

async function makeStore(s: Settings, logger: Logger, metrics: Metrics, tracing: Tracing | undefined): Promise<Store> {
  const bounds = { timeoutMs: s.storeTimeoutMs, breakerThreshold: s.circuitFailures, probeIntervalMs: s.circuitProbeMs };
  // With tracing on, a store call is also noted on the traced call it was made for.
  const storeCall: (node: string, seconds: number, ok: boolean) => void = tracing
    ? (node, seconds, ok) => {
        metrics.storeCall(node, seconds, ok);
        tracing.storeCall(node, seconds, ok);
      }
    : (node, seconds, ok) => metrics.storeCall(node, seconds, ok);
  const redis = s.redisUrls.length > 0 || s.redisCluster.length > 0 || s.redisSentinel ? await import("./store/redis-spec.js") : undefined;
  const main = redis?.redisStoreFromSpec(
    { urls: s.redisUrls, cluster: s.redisCluster, sentinel: s.redisSentinel, auth: s.redisAuth, sentinelAuth: s.redisSentinelAuth },
    { ...bounds, logger, onCall: storeCall, clusterEvents: () => metrics.clusterEvents() },
  );
  if (!main) {
    logger.info("no --redis given: embedded memory store, single-instance mode (counters are not shared)");
    return new MemoryStore({ maxKeys: s.memoryMaxKeys });
  }
  if (!s.redisPerSecond) return main;
  // The reference's REDIS_PERSECOND: limits whose unit is a second count in a Redis of their own.
  const perSecond = redis!.redisStoreFromSpec(s.redisPerSecond, {
    ...bounds,
    logger: logger.child({ storeRole: "per_second" }),
    onCall: (node, seconds, ok) => storeCall(perSecondNodeId(node), seconds, ok),
  })!;
  return new SplitByUnitStore(main, perSecond);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`sluice: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
