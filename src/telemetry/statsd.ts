// The statsd sink: every flush interval, the counters the Prometheus metrics keep are read and their
// growth since the last flush is sent as statsd counters (`name:N|c`) under envoyproxy/ratelimit's names
// (statsd-names.ts), as its gostats store does. Nothing is added to the call path: the sink only reads.
// Lines go through hot-shots (UDP or TCP), batched into packets of at most PACKET_BYTES.
import StatsDClient, { type StatsD } from "hot-shots";
import type { Logger } from "pino";
import type { Metrics } from "./metrics.js";
import { RULE_STAT_PREFIX, sanitizeStatName, tagSuffix } from "./statsd-names.js";

/** The reference's (gostats') UDP payload: fits a 1500-byte MTU without fragmenting. */
const PACKET_BYTES = 1432;
/** Longest wait for a flush or close to be handed to the socket. */
const HANDOVER_MS = 1000;
/** A send error is logged at most this often. */
const ERROR_LOG_MS = 60_000;

export interface StatsdSettings {
  host: string;
  port: number;
  protocol: "udp" | "tcp";
  flushMs: number;
  /** Appended to every name in gostats' form (`.__key=value`), as the reference does with EXTRA_TAGS. */
  tags: Record<string, string>;
}

/** The reference's counter of each per-rule count (its over_limit includes shadow-mode refusals). */
const RULE_STATS: [
  string,
  (c: { hits: number; overLimit: number; shadowMode: number; nearLimit: number; withinLimit: number; overLimitWithLocalCache: number }) => number,
][] = [
  ["total_hits", (c) => c.hits],
  ["over_limit", (c) => c.overLimit + c.shadowMode],
  ["near_limit", (c) => c.nearLimit],
  ["over_limit_with_local_cache", (c) => c.overLimitWithLocalCache],
  ["within_limit", (c) => c.withinLimit],
  ["shadow_mode", (c) => c.shadowMode],
];

export class StatsdSink {
  private readonly client: StatsD;
  private readonly suffix: string;
  /** Totals already sent, by full stat name: the next flush sends what grew since. */
  private readonly sent = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;
  /** One flush at a time: while the previous one is still being written, the next is skipped (its growth waits). */
  private flushing?: Promise<void>;
  private lastErrorLog = 0;
  private closed = false;

  constructor(
    private readonly metrics: Metrics,
    readonly settings: StatsdSettings,
    private readonly logger: Logger,
  ) {
    this.suffix = tagSuffix(settings.tags);
    this.client = new StatsDClient({
      host: settings.host,
      port: settings.port,
      protocol: settings.protocol,
      maxBufferSize: PACKET_BYTES,
      // Packets leave at our flush; hot-shots' own timer only catches a remainder.
      bufferFlushInterval: Math.min(1000, settings.flushMs),
      cacheDns: true,
      // Plain statsd: no DogStatsD tags, telemetry or origin fields, whatever DD_* variables say.
      datadog: false,
      includeDataDogTags: false,
      includeDatadogTelemetry: false,
      errorHandler: (err) => this.sendFailed(err),
    });
    this.timer = setInterval(() => void this.flush(), settings.flushMs);
    this.timer.unref();
  }

  /** Sends what grew since the last flush; resolves when it is handed to the socket. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    const run = this.send().finally(() => (this.flushing = undefined));
    this.flushing = run;
    return run;
  }

  /** Stops the timer, sends the last growth, closes the socket. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.flushing;
    await this.flush();
    await this.handedOver((done) => this.client.close(() => done()));
  }

  /** Current totals by full stat name (several rules may share a name: they add up, as in the reference). */
  totals(): Promise<Map<string, number>> {
    return referenceStatTotals(this.metrics, this.suffix);
  }

  private async send(): Promise<void> {
    const totals = await this.totals();
    let lines = 0;
    for (const [name, total] of totals) {
      const delta = total - (this.sent.get(name) ?? 0);
      if (delta <= 0) continue;
      this.client.increment(name, delta);
      this.sent.set(name, total);
      lines++;
    }
    if (lines === 0) return;
    await this.handedOver((done) => this.client.flush(() => done()));
  }

  /** Waits for hot-shots' callback, at most HANDOVER_MS: a peer that never answers must not stop later flushes. */
  private handedOver(start: (done: () => void) => void): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, HANDOVER_MS);
      timer.unref();
      start(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private sendFailed(err: Error): void {
    const now = Date.now();
    if (now - this.lastErrorLog < ERROR_LOG_MS) return;
    this.lastErrorLog = now;
    this.logger.warn({ err: err.message, host: this.settings.host, port: this.settings.port }, "statsd send failed (counts are not resent)");
  }
}

/**
 * The counters under the reference's stat names with their totals, each name followed by `suffix` (the
 * statsd tags): what the sink sends the growth of, and what the reference's debug port shows at /stats.
 */
export async function referenceStatTotals(metrics: Metrics, suffix = ""): Promise<Map<string, number>> {
  const totals = new Map<string, number>();
  const add = (name: string, n: number) => {
    if (n > 0) totals.set(name, (totals.get(name) ?? 0) + n);
  };
  for (const c of metrics.rules.statSeries()) {
    const base = RULE_STAT_PREFIX + sanitizeStatName(c.stat) + ".";
    for (const [stat, read] of RULE_STATS) add(base + stat + suffix, read(c));
  }
  const sum = (metric: string, sample?: string) => sumMetric(metrics, metric, sample);
  const loads = await sum("sluice_config_loads_total");
  add("ratelimit.service.config_load_success" + suffix, loads.get("success") ?? 0);
  add("ratelimit.service.config_load_error" + suffix, loads.get("error") ?? 0);
  add("ratelimit.service.call.should_rate_limit.service_error" + suffix, (await sum("sluice_request_errors_total")).get("") ?? 0);
  add("ratelimit.service.call.should_rate_limit.redis_error" + suffix, (await sum("sluice_store_errors_total")).get("") ?? 0);
  add("ratelimit.service.global_shadow_mode" + suffix, (await sum("sluice_global_shadow_mode_total")).get("") ?? 0);
  const calls = await sum("sluice_should_rate_limit_duration_seconds", "sluice_should_rate_limit_duration_seconds_count");
  add("ratelimit_server.ShouldRateLimit.total_requests" + suffix, calls.get("") ?? 0);
  return totals;
}

/**
 * A Prometheus metric's values summed: by its `result` label (config loads), and over everything under
 * "". `sample` picks one series of a histogram (its _count).
 */
async function sumMetric(metrics: Metrics, metric: string, sample?: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const m = metrics.registry.getSingleMetric(metric);
  if (!m) return out;
  for (const v of (await m.get()).values) {
    if (sample !== undefined && (v as { metricName?: string }).metricName !== sample) continue;
    const result = v.labels.result;
    if (typeof result === "string") out.set(result, (out.get(result) ?? 0) + v.value);
    out.set("", (out.get("") ?? 0) + v.value);
  }
  return out;
}
