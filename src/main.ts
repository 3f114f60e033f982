#!/usr/bin/env -S node --max-semi-space-size=16
// CLI: sluice serve | check | explain | top. serve builds (rules, store, limiter), starts (ports, gRPC, reloads)
// and closes through one list of closers (closers.ts); nothing else lives here.
// The shebang's V8 flag is sluice's memory setting, the same in `npm start` and the Docker image (docs/operating.md
// "Memory"): Node 24's default young generation grows to 2 x 64 MiB under load and keeps that RSS.
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { Limiter } from "./limiter/limiter.js";
import { errorTotal, loadRuleDir, type LoadResult } from "./rules/load.js";
import { formatRuleError, type RuleSet } from "./rules/model.js";
import { keyScanPattern } from "./core/keys.js";
import { SecretValues } from "./core/secret.js";
import { ruleCounts } from "./rules/watch.js";
import { footprint, footprintLine } from "./inspect/footprint.js";
import { DirectorySource, type RuleSource, type RuleSourceOptions } from "./rules/source.js";
import { healthRoutes, type AdminHandler, type Readiness, type RunningAdminServer } from "./server/admin.js";
import { startAdminPort } from "./server/admin-port.js";
import { ListenError, logListenError } from "./server/listen-error.js";
import type { CallObserver, RunningTransport } from "./server/grpc-contract.js";
import { startH2Server } from "./server/h2/server.js";
import { RlqsService } from "./rlqs/service.js";
import { setHeapGrowth } from "./server/heap-growth.js";
import { serverTls, type ServerTls } from "./server/tls.js";
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
import { hasApproximateLimits } from "./approximate/has-approximate-limits.js";
import { approximateMetrics } from "./telemetry/approximate-metrics.js";
import { rlqsMetrics } from "./telemetry/rlqs-metrics.js";
import { Metrics } from "./telemetry/metrics.js";
import { withDeadline } from "./store/deadline.js";
import { reportReferenceEnv } from "./compat/report.js";
import { referenceMetadata } from "./server/reference-metadata.js";
import { ReferenceHealth } from "./server/http-health.js";
import { servingFollowsStore } from "./server/grpc-health-store.js";
import { startReferenceListeners, type RunningReferenceListeners } from "./server/http-listeners.js";
import { serviceLogger } from "./telemetry/logger.js";
import { MemoryStore } from "./store/memory.js";
import { perSecondNodeId, SplitByUnitStore } from "./store/split-by-unit.js";
import { Closers } from "./closers.js";
import type { ScriptErrorKind } from "./store/script-errors.js";
import { catchStopSignals, stopRequested, untilStopped } from "./stop-signals.js";
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
  catchStopSignals(); // bin.ts did already, unless main.js was started directly
  setHeapGrowth(settings.heapGrowingPercent);
  const logger = serviceLogger(settings.logLevel, settings.logFormat);
  // Stopped while sluice's modules loaded: nothing was opened.
  const early = stopRequested();
  if (early) return stoppedBeforeServing(logger, early);
  if (!isWorker()) reportReferenceEnv(logger, settings);
  const reusePort = settings.workers > 1 && useReusePort(true) /* h2 binds with SO_REUSEPORT */;
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
    return built && !stopRequested() ? await start(built, s, reusePort, logger, closers) : undefined;
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

/** What build() made: nothing listens yet. */
interface Built {
  metrics: Metrics;
  source: RuleSource;
  store: Store;
  limiter: Limiter;
  tls: ServerTls | undefined;
  tracing: Tracing | undefined;
  loadedAt: string;
  secrets: SecretValues;
}

interface Running {
  /** Ready once the gRPC server serves, until shutdown starts. */
  ready: { value: boolean };
  /** gRPC health turns NOT_SERVING (calls are still served). */
  notServing(): void;
  listening: Record<string, unknown>;
}

/** Rules, metrics, telemetry, the store and the limiter; undefined when the rules cannot be served (said in the log). */
async function build(s: Settings, logger: Logger, closers: Closers): Promise<Built | undefined> {
  // Values of secret descriptor keys: a keyed hash in store keys, logs, metrics, explain and /top. Rule paths
  // holding one are learned at each load, before the rules serve.
  const secrets = new SecretValues(s.topSecretKeys, s.topHashKey);
  // Sources are read at scrape time, after store and limiter exist.
  const metrics: Metrics = new Metrics(
    { rules: () => limiter.getRules(), store: () => store.status(), denyNotes: () => limiter.denyNoteCount },
    { detailedValuesPerRule: s.detailedMetricMaxValues, statKeys: s.statsd !== undefined, nearLimitRatio: s.nearLimitRatio, secrets },
  );
  closers.add("metrics", () => metrics.close());
  const source = await ruleSource(s, metrics, {
    load: { mergeDomains: s.mergeDomains, failureMode: s.failureMode },
    logger,
    // Called back only after source.start(), when limiter exists.
    onLoad: (result) => {
      if (result.rules) secrets.learn(result.rules);
      const before = limiter.getRules();
      applyReload(result, limiter, source.origin, logger);
      metrics.configLoaded(result.rules, before, result.stats);
    },
  });
  closers.add("rule source", () => source.close());
  const loaded = await source.first(s.forceStartWithoutRules);
  // Stopped meanwhile: the load was cut short by the stop, not by the rules.
  if (stopRequested()) return undefined;
  logLoadProblems(logger, source.origin, loaded);
  if (!loaded.rules) {
    if (loaded.errors.length > 0) logger.error({ ...source.origin, errors: errorTotal(loaded) }, "rules failed to load");
    if (!s.forceStartWithoutRules) return undefined;
    logger.warn(source.origin, "serving with no rules until valid rules arrive (FORCE_START_WITHOUT_INITIAL_CONFIG)");
  }
  const initialRules: RuleSet = loaded.rules ?? { domains: new Map() };
  secrets.learn(initialRules);
  if (loaded.rules) logger.info({ ...source.origin, domains: ruleCounts(loaded.rules), ...loadCost(loaded) }, "rules loaded");
  const loadedAt = new Date().toISOString();

  // No rules yet because none arrived (xDS with FORCE_START) is not a failed load.
  if (loaded.rules || loaded.errors.length > 0) metrics.configLoaded(loaded.rules, undefined, loaded.stats);
  if (s.statsd) {
    const statsd = new (await import("./telemetry/statsd.js")).StatsdSink(metrics, s.statsd, logger);
    // Closed after the drain: the last calls' counts go out in the final flush.
    closers.add("statsd", () => withDeadline(statsd.close(), STATSD_CLOSE_MS).catch(() => logger.warn("statsd: the last flush did not finish")));
  }
  const tracing = s.tracing ? await startTracing(s.tracing, logger) : undefined;
  if (tracing) {
    // The last spans are exported within what is left of the grace period.
    closers.add("tracing", (left) => withDeadline(tracing.close(), left()).catch(() => logger.warn("tracing: the last spans were not all exported")));
  }
  if (Object.keys(s.metricLabels).length > 0) metrics.registry.setDefaultLabels(s.metricLabels); // EXTRA_TAGS
  // Configuration that cannot work throws a UsageError (RedisOptionsError, TlsConfigError) naming the file, never a secret.
  const store: Store = await makeStore(s, logger, metrics, tracing);
  closers.add("store", () => withDeadline(store.close(), STORE_CLOSE_MS).catch(() => undefined));
  const tls: ServerTls | undefined = s.tls ? serverTls(s.tls, logger) : undefined;
  if (tls) closers.add("tls", () => tls?.close());
  // Approximate limits take leases from a remote store; in front of one that counts in this process they are exact.
  const approximate: Leases | undefined = store.lease
    ? new Leases(store as Store & Required<Pick<Store, "lease">>, {
        maxKeys: s.approximateMaxKeys,
        onCall: approximateMetrics(metrics.registry, () => approximate),
      })
    : undefined;
  if (approximate) {
    // After the drain: unused lease units go back to the store within what is left of the grace.
    closers.add("approximate limits", async (left) => {
      const units = await approximate.close(Math.max(100, left()));
      if (units > 0) logger.warn({ units }, "approximate limits: unused lease units not given back before shutdown (held until their window ends)");
    });
  }
  const limiter: Limiter = new Limiter(initialRules, store, {
    approximate,
    // The note saves a remote call; in front of the embedded memory store it would only add a copy.
    denyNoteMaxEntries: store.inProcess ? 0 : s.denyNoteMax,
    denyNoteMaxMs: s.denyNoteMaxMs,
    fallback: new MemoryStore({ maxKeys: s.localMaxKeys }),
    keyPrefix: s.keyPrefix,
    secrets,
    globalShadowMode: s.globalShadowMode,
    globalQuotaMode: s.globalQuotaMode,
    referenceKeys: s.referenceKeys,
    responseHeaders: s.responseHeaders.enabled ? s.responseHeaders : undefined,
    responseMetadata: s.responseMetadata,
    referenceMetadata,
  });
  if (!approximate && hasApproximateLimits(initialRules)) logger.info("approximate limits are decided exactly: the store counts in this process");
  if (s.keyPrefix !== "") logger.info({ keyPrefix: s.keyPrefix, keys: keyScanPattern(s.keyPrefix) }, "store keys carry a prefix");
  return { metrics, source, store, limiter, tls, tracing, loadedAt, secrets };
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
  const rlqs = new RlqsService({ store, fallback: limiter.fallback, rules: () => limiter.getRules(), keyPrefix: s.keyPrefix, logger });
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
  logger.error({ ...origin, errors: errorTotal(result), ...loadCost(result) }, "rules not reloaded: the last good rules keep serving");
}

/** A load's cost for its log line: wall time, and the event loop's part (all of it, and its longest step). */
function loadCost(r: LoadResult): Record<string, number> {
  if (!r.stats) return {};
  const ms = (v: number) => Math.round(v * 10) / 10;
  return { loadMs: ms(r.stats.durationMs), mainThreadMs: ms(r.stats.mainThreadMs), longestStepMs: ms(r.stats.longestStepMs), parsedFiles: r.stats.parsed };
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

/** GET /metrics (Prometheus text) and GET /rules (the rules in force, with file and line). */
function opsRoutes(metrics: Metrics, limiter: Limiter, rlqs: RlqsService): Record<string, AdminHandler> {
  return {
    "/metrics": async () => ({ status: 200, body: await metrics.text(), contentType: metrics.contentType }),
    "/rules": () => ({ status: 200, body: rulesJson(limiter.getRules(), rlqs) }),
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
  const redis = s.redisUrls.length > 0 || s.redisCluster.length > 0 || s.redisSentinel ? await import("./store/make-redis-store.js") : undefined;
  // Error replies counted by kind; the permission check at each connect asks for /top's commands only when summaries are kept.
  const scripts = { onScriptError: (node: string, kind: ScriptErrorKind) => metrics.scriptError(node, kind) };
  const permissionNeeds = { keyPrefix: s.keyPrefix, summaries: s.topSummaries };
  const main = redis?.redisStoreFromSpec(
    { urls: s.redisUrls, cluster: s.redisCluster, sentinel: s.redisSentinel, auth: s.redisAuth, sentinelAuth: s.redisSentinelAuth },
    { ...bounds, ...scripts, permissionNeeds, logger, onCall: storeCall, clusterEvents: () => metrics.clusterEvents() },
  );
  if (!main) {
    logger.info("no --redis given: embedded memory store, single-instance mode (counters are not shared)");
    return new MemoryStore({ maxKeys: s.memoryMaxKeys });
  }
  if (!s.redisPerSecond) return main;
  // The reference's REDIS_PERSECOND: limits whose unit is a second count in a Redis of their own.
  const perSecond = redis!.redisStoreFromSpec(s.redisPerSecond, {
    ...bounds,
    permissionNeeds: { ...permissionNeeds, summaries: false }, // summaries go to the main store
    logger: logger.child({ storeRole: "per_second" }),
    onCall: (node, seconds, ok) => storeCall(perSecondNodeId(node), seconds, ok),
    onScriptError: (node, kind) => metrics.scriptError(perSecondNodeId(node), kind),
  })!;
  return new SplitByUnitStore(main, perSecond);
}

/** The longest an exit waits for stdout and stderr to take what was written (a reader that never reads). */
const FLUSH_MS = 10_000;

/**
 * Exits once stdout and stderr took everything written: a pipe that is full queues the rest, which process.exit
 * would drop (`sluice check` of a file with 130,000 errors printed 1,500 of them).
 */
function exitAfterFlush(code: number): void {
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write("", done);
  process.stderr.write("", done);
  setTimeout(() => process.exit(code), FLUSH_MS).unref();
}

main(process.argv.slice(2)).then(exitAfterFlush, (err) => {
  process.stderr.write(`sluice: ${(err as Error).stack ?? err}\n`);
  exitAfterFlush(1);
});
