// What `sluice serve` builds before anything listens: the rules and their source, metrics, statsd, tracing, the
// store the settings describe, approximate limits and the limiter. Each part is added to the closers as it opens.
import type { Logger } from "pino";
import { Limiter } from "../limiter/limiter.js";
import { errorTotal, type LoadResult } from "../rules/load.js";
import type { RuleSet } from "../rules/model.js";
import { keyScanPattern } from "../core/keys.js";
import { SecretValues } from "../core/secret.js";
import { ruleCounts } from "../rules/watch.js";
import { DirectorySource, type RuleSource, type RuleSourceOptions } from "../rules/source.js";
import { serverTls, type ServerTls } from "../server/grpc/tls.js";
import type { Settings } from "../settings/settings.js";
import { ALLOW_EMPTY_HINT } from "../rules/empty-dir.js";
import { logLoadProblems } from "../telemetry/rule-log.js";
import { Leases } from "../approximate/leases.js";
import { hasApproximateLimits } from "../approximate/has-approximate-limits.js";
import { approximateMetrics } from "../telemetry/approximate-metrics.js";
import { Metrics } from "../telemetry/metrics.js";
import { withDeadline } from "../store/deadline.js";
import { referenceMetadata } from "../server/reference/reference-metadata.js";
import { MemoryStore } from "../store/memory.js";
import { perSecondNodeId, SplitByUnitStore } from "../store/split-by-unit.js";
import type { Closers } from "./closers.js";
import type { ScriptErrorKind } from "../store/script-errors.js";
import { stopRequested } from "./stop-signals.js";
import type { Store } from "../store/store.js";
import type { Tracing } from "../telemetry/tracing.js";
import type { TracingSettings } from "../telemetry/tracing-settings.js";

/** What build() made: nothing listens yet. */
export interface Built {
  metrics: Metrics;
  source: RuleSource;
  store: Store;
  limiter: Limiter;
  tls: ServerTls | undefined;
  tracing: Tracing | undefined;
  loadedAt: string;
  secrets: SecretValues;
}

/** Rules, metrics, telemetry, the store and the limiter; undefined when the rules cannot be served (said in the log). */
export async function build(s: Settings, logger: Logger, closers: Closers): Promise<Built | undefined> {
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
    // A changed domain's secret values are hashed in steps before it serves: 10,000 of them in one go held the
    // event loop about 30 ms (learn() below then finds every domain walked).
    prepare: (domain) => secrets.learnSteps(domain),
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
    const statsd = new (await import("../telemetry/statsd.js")).StatsdSink(metrics, s.statsd, logger);
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

/** The rule directory, or the xDS server when one is configured (--config-xds, CONFIG_TYPE=GRPC_XDS_SOTW). */
async function ruleSource(s: Settings, metrics: Metrics, o: RuleSourceOptions): Promise<RuleSource> {
  // The xDS client (grpc-js) and, below, ioredis and statsd are loaded only when configured (idle memory).
  if (s.configXds) {
    const { XdsRuleSource } = await import("../xds/rule-source.js");
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

/** OpenTelemetry's SDK and exporters are loaded only when tracing is on: off, the process holds none of it. */
async function startTracing(t: TracingSettings, logger: Logger): Promise<Tracing> {
  const [{ Tracing }, { otlpExporter }] = await Promise.all([import("../telemetry/tracing.js"), import("../telemetry/tracing-exporter.js")]);
  return new Tracing(t, otlpExporter(t), logger);
}

/** Closing the store must not hold the exit: a hung connection is dropped with the process. */
export const STORE_CLOSE_MS = 2000;
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
  const redis = s.redisUrls.length > 0 || s.redisCluster.length > 0 || s.redisSentinel ? await import("../store/make-redis-store.js") : undefined;
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
