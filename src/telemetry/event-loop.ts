// Event-loop delay and GC pauses as Prometheus histograms: a stalled loop delays every reply this
// process reads, so these tell a slow store from a busy process. Nothing here runs per request:
// delay is sampled by Node's native timer and turned into buckets when Prometheus scrapes.
import { constants, monitorEventLoopDelay, PerformanceObserver, type ELDHistogram, type NodeGCPerformanceDetail, type PerformanceEntry } from "node:perf_hooks";
import { Histogram, type Registry } from "prom-client";

/**
 * 2 ms: a stall shorter than the sampling period can fall between two ticks unseen, and the stalls
 * that matter here are the store deadline's and Envoy's (tens of ms); 1 ms would double the idle
 * wake-ups for nothing, prom-client's 10 ms would miss stalls of a few ms.
 */
const EVENT_LOOP_RESOLUTION_MS = 2;
/** Seconds, 1 ms..1 s. */
const EVENT_LOOP_DELAY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** Seconds: scavenges take well under a millisecond to tens of ms, mark-compacts up to hundreds. */
const GC_PAUSE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

const GC_KINDS = new Map<number, string>([
  [constants.NODE_PERFORMANCE_GC_MINOR, "minor"],
  [constants.NODE_PERFORMANCE_GC_MAJOR, "major"],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, "incremental"],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, "weakcb"],
]);

const DELAY_NAME = "sluice_event_loop_delay_seconds";

interface EventLoopMetricsOptions {
  resolutionMs?: number;
}

/** Registers both histograms in the registry; stop() ends the sampling (nothing here holds the process open). */
export class EventLoopMetrics {
  private readonly eld: ELDHistogram;
  private readonly gc: PerformanceObserver;
  private stopped = false;

  constructor(registry: Registry, o: EventLoopMetricsOptions = {}) {
    const resolutionMs = o.resolutionMs ?? EVENT_LOOP_RESOLUTION_MS;
    // Its native timer is unref'd: it keeps no process alive.
    this.eld = monitorEventLoopDelay({ resolution: resolutionMs });
    this.eld.enable();
    registry.registerMetric(delayMetric(this.eld, resolutionMs) as unknown as Histogram);

    const pauses = new Histogram({
      name: "sluice_gc_pause_seconds",
      help: "Garbage collection pauses of this process by kind (minor = scavenge, major = mark-compact, incremental marking steps, weakcb = weak callbacks)",
      labelNames: ["kind"],
      buckets: GC_PAUSE_BUCKETS,
      registers: [registry],
    });
    for (const kind of GC_KINDS.values()) pauses.zero({ kind });
    this.gc = new PerformanceObserver((list) => {
      // Every entry: the observer delivers them in batches (prom-client's own gc metric keeps the first only).
      for (const e of list.getEntries()) {
        const detail = (e as PerformanceEntry & { detail?: NodeGCPerformanceDetail }).detail;
        const kind = GC_KINDS.get(detail?.kind ?? -1);
        if (kind) pauses.observe({ kind }, e.duration / 1000);
      }
    });
    this.gc.observe({ entryTypes: ["gc"] });
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.eld.disable();
    this.gc.disconnect();
  }
}

/**
 * A Prometheus histogram read from Node's event-loop-delay histogram at scrape time. Node records
 * the time between two ticks of its timer (resolution + delay), so a sample's delay is that minus
 * the resolution. The samples are never reset (a reset drops the interval it falls in), so the
 * buckets are cumulative since start. The count at or under a bound is found by bisecting the
 * histogram's percentiles (the k-th smallest sample): exact to its 3 significant digits, about
 * 1 ms of native lookups per scrape.
 */
function delayMetric(h: ELDHistogram, resolutionMs: number) {
  const resolutionNs = resolutionMs * 1e6;
  let lastSum = 0;
  const values = () => {
    const n = h.count;
    const out: { metricName: string; labels: Record<string, string | number>; value: number }[] = [];
    let lo = 0;
    for (const le of EVENT_LOOP_DELAY_BUCKETS) {
      lo = countAtMost(h, n, le * 1e9 + resolutionNs, lo);
      out.push({ metricName: `${DELAY_NAME}_bucket`, labels: { le }, value: lo });
    }
    out.push({ metricName: `${DELAY_NAME}_bucket`, labels: { le: "+Inf" }, value: n });
    // Ticks that came early (libuv's timer runs on a 1 ms clock) give small negative delays; a
    // Prometheus sum must not go down.
    if (n > 0) lastSum = Math.max(lastSum, (h.mean * n - resolutionNs * n) / 1e9);
    out.push({ metricName: `${DELAY_NAME}_sum`, labels: {}, value: lastSum });
    out.push({ metricName: `${DELAY_NAME}_count`, labels: {}, value: n });
    return out;
  };
  return {
    name: DELAY_NAME,
    help: `Event-loop delay: how late a ${resolutionMs} ms timer ran, sampled on every tick (a loop blocked for D seconds gives one sample of about D)`,
    type: "histogram",
    aggregator: "sum",
    async get() {
      return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: values() };
    },
    reset() {
      h.reset();
      lastSum = 0;
    },
  };
}

/** Samples of h (n in all) at or under limitNs; lo: a count known to be at or under it. */
export function countAtMost(h: Pick<ELDHistogram, "min" | "max" | "percentile">, n: number, limitNs: number, lo = 0): number {
  if (n === 0 || h.min > limitNs) return 0;
  if (h.max <= limitNs) return n;
  // The k-th smallest sample is percentile(100 k / n); it is over the limit for k = n.
  let hi = n - 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (h.percentile((100 * mid) / n) <= limitNs) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
