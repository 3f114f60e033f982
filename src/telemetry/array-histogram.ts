// A Prometheus histogram kept in plain arrays, for the metrics every call records (call and store
// latency). prom-client's Histogram.observe makes a label object, a closure, a value/labels pair and
// a label-hash string per observation, and looks its bucket up by a number turned into a string key;
// here an observation is a bucket scan and three additions. Series become samples only at scrape
// time, in the text prom-client's own Histogram gives (same lines, same label order).
import type { Histogram, Registry } from "prom-client";

/** One label value's counts: per bucket (not cumulative), the last slot for samples above every bound. */
export class HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(seconds: number): void {
    if (!Number.isFinite(seconds)) return; // a sum must stay a number
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]) i++;
    this.counts[i]++;
    this.sum += seconds;
    this.count++;
  }
}

interface Sample {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

interface ArrayHistogramOptions {
  name: string;
  help: string;
  /** Upper bounds in seconds, ascending. */
  buckets: readonly number[];
  /** At most one label; without it the histogram has one series. */
  labelName?: string;
  registers: Registry[];
}

export class ArrayHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = "histogram";
  readonly aggregator = "sum";
  private readonly bounds: readonly number[];
  private readonly labelName: string | undefined;
  /** Series by label value ("" without a label), in the order they were first seen. */
  private readonly bySeries = new Map<string, HistogramSeries>();
  /** The last series looked up: one store node (or none) is the common case. */
  private lastValue: string | undefined;
  private lastSeries: HistogramSeries | undefined;

  constructor(o: ArrayHistogramOptions) {
    for (let i = 1; i < o.buckets.length; i++) if (!(o.buckets[i] > o.buckets[i - 1])) throw new Error(`${o.name}: buckets must ascend`);
    this.name = o.name;
    this.help = o.help;
    this.bounds = [...o.buckets];
    this.labelName = o.labelName;
    if (o.labelName === undefined) this.series("");
    for (const r of o.registers) r.registerMetric(this as unknown as Histogram);
  }

  /** The series of a label value (the only one without a label), made on first use; keep it to skip the lookup. */
  series(value = ""): HistogramSeries {
    if (value === this.lastValue) return this.lastSeries!;
    let s = this.bySeries.get(value);
    if (!s) this.bySeries.set(value, (s = new HistogramSeries(this.bounds)));
    this.lastValue = value;
    this.lastSeries = s;
    return s;
  }

  observe(seconds: number, value = ""): void {
    this.series(value).observe(seconds);
  }

  /** What prom-client's registry reads when /metrics is scraped. */
  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    const values: Sample[] = [];
    const name = this.name;
    for (const [value, s] of this.bySeries) {
      const base: Record<string, string> = this.labelName === undefined ? {} : { [this.labelName]: value };
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.counts[i];
        values.push({ metricName: `${name}_bucket`, labels: { le: this.bounds[i], ...base }, value: acc });
      }
      values.push({ metricName: `${name}_bucket`, labels: { le: "+Inf", ...base }, value: s.count });
      values.push({ metricName: `${name}_sum`, labels: { ...base }, value: s.sum });
      values.push({ metricName: `${name}_count`, labels: { ...base }, value: s.count });
    }
    return { name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** Zeroes every series in place: callers may hold a series (Registry.resetMetrics calls this). */
  reset(): void {
    for (const s of this.bySeries.values()) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}
