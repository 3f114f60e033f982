// /metrics for `--workers N`: the primary asks every worker for its registry (as JSON) and serves one
// view. Rules (docs/operating.md "With --workers"):
// - Counters and histograms are summed over workers. A worker that exits hands its last snapshot to a
//   carried total that stays in the sum, so a restarted worker starting from zero never makes a total
//   go down. Snapshots are taken at every scrape and every SNAPSHOT_INTERVAL_MS, so a worker killed
//   without warning loses at most that long of counts from Prometheus (statsd sent its own deltas).
// - Per-process figures (process_*, nodejs_*, event-loop delay, GC pauses, deny notes) carry a `worker`
//   label (the worker's slot, 0..N-1, kept by its restarts) and are never carried: they end with the process.
// - Group gauges aggregate by meaning (GAUGE_AGGREGATOR): a store node is up only if every worker sees it up.
// - A worker that does not answer within SCRAPE_TIMEOUT_MS is reported (sluice_worker_scrape_ok 0,
//   sluice_worker_scrape_failures_total, a log line); its counters and histograms count from its last
//   snapshot (so totals stay monotonic), its gauges are left out of that scrape.
import type { Worker } from "node:cluster";
import type { Logger } from "pino";
import { AggregatorRegistry } from "prom-client";
import { askWorker } from "./group-ipc.js";

export const SCRAPE_TIMEOUT_MS = 2000;
const SNAPSHOT_INTERVAL_MS = 5000;

interface Value {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}
export interface MetricJson {
  name: string;
  help: string;
  type: string;
  aggregator: string;
  values: Value[];
}

interface Member {
  slot: number;
  worker: Worker;
}

const PER_WORKER = /^(process_|nodejs_|sluice_event_loop_|sluice_gc_pause_|sluice_deny_notes$|sluice_config_load_)/;
const GAUGE_AGGREGATOR: Record<string, string> = {
  sluice_store_node_up: "min",
  sluice_store_circuit_open: "max",
  sluice_store_calls_in_flight: "sum",
  sluice_approximate_leased_units: "sum",
  // The oldest rules in force in any worker (a worker that lags a reload shows).
  sluice_config_last_success_timestamp_seconds: "min",
  sluice_config_rules: "max",
};
const CALLS_COUNT = "sluice_should_rate_limit_duration_seconds_count";

const summed = (m: MetricJson) => (m.type === "counter" || m.type === "histogram") && !PER_WORKER.test(m.name);
const valueKey = (v: Value) => `${v.metricName ?? ""}|${JSON.stringify(Object.entries(v.labels).sort(([a], [b]) => (a < b ? -1 : 1)))}`;

export type Carried = Map<string, { meta: MetricJson; values: Map<string, Value> }>;

/** Adds an exited worker's counters and histograms to the carried total (gauges and per-process figures end with it). */
export function carryInto(carried: Carried, metrics: MetricJson[]): void {
  for (const m of metrics) {
    if (!summed(m)) continue;
    let c = carried.get(m.name);
    if (!c) carried.set(m.name, (c = { meta: { ...m, aggregator: "sum", values: [] }, values: new Map() }));
    for (const v of m.values) {
      const k = valueKey(v);
      c.values.set(k, { ...v, value: (c.values.get(k)?.value ?? 0) + v.value });
    }
  }
}

export function carriedView(carried: Carried): MetricJson[] {
  return [...carried.values()].map((c) => ({ ...c.meta, values: [...c.values.values()] }));
}

/**
 * One worker's registry as it enters the group's sum: counters and histograms summed, per-process figures
 * labelled with its slot, gauges by GAUGE_AGGREGATOR. From a stale snapshot (fresh false) only what is summed.
 */
export function workerView(metrics: MetricJson[], slot: number, fresh: boolean): MetricJson[] {
  const out: MetricJson[] = [];
  for (const m of metrics) {
    if (summed(m)) out.push({ ...m, aggregator: "sum" });
    else if (!fresh)
      continue; // a gauge from a stale snapshot would mislead
    else if (PER_WORKER.test(m.name)) {
      out.push({ ...m, aggregator: "sum", values: m.values.map((v) => ({ ...v, labels: { ...v.labels, worker: slot } })) });
    } else out.push({ ...m, aggregator: GAUGE_AGGREGATOR[m.name] ?? m.aggregator });
  }
  return out;
}

interface Snapshot {
  seq: number;
  metrics: MetricJson[];
}

export class GroupMetrics {
  /** By worker id (not slot): a restarted worker starts without one. */
  private readonly snapshots = new Map<number, Snapshot>();
  /** Counters and histograms of workers that exited, summed: name -> value key -> value. */
  private readonly carried: Carried = new Map();
  private readonly scrapeFailures = new Map<number, number>();
  private readonly exits = new Map<number, number>();
  private seq = 0;
  private timer?: NodeJS.Timeout;

  constructor(private readonly o: { members: () => Member[]; slots: number; labels: Record<string, string>; logger: Logger; timeoutMs?: number }) {
    for (let slot = 0; slot < o.slots; slot++) {
      this.scrapeFailures.set(slot, 0);
      this.exits.set(slot, 0);
    }
  }

  /** Background snapshots, so that a worker that dies between scrapes loses little. */
  start(): void {
    this.timer = setInterval(() => void this.collect().catch(() => undefined), SNAPSHOT_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Called when a worker exits: its last snapshot's counters and histograms join the carried total. */
  workerExited(workerId: number, slot: number): void {
    this.exits.set(slot, (this.exits.get(slot) ?? 0) + 1);
    const snap = this.snapshots.get(workerId);
    this.snapshots.delete(workerId);
    if (snap) carryInto(this.carried, snap.metrics);
  }

  /** Asks every worker; returns the slots that answered. Answers update the snapshots. */
  private async collect(): Promise<Map<number, Member>> {
    const members = this.o.members();
    const answered = new Map<number, Member>();
    await Promise.all(
      members.map(async (m) => {
        const seq = ++this.seq;
        try {
          const metrics = (await askWorker(m.worker, "metrics", this.o.timeoutMs ?? SCRAPE_TIMEOUT_MS)) as MetricJson[];
          // Only a worker still alive, and never an older answer over a newer one.
          if (m.worker.isDead() || !m.worker.isConnected()) return;
          const had = this.snapshots.get(m.worker.id);
          if (!had || had.seq < seq) this.snapshots.set(m.worker.id, { seq, metrics });
          answered.set(m.slot, m);
        } catch (err) {
          this.scrapeFailures.set(m.slot, (this.scrapeFailures.get(m.slot) ?? 0) + 1);
          this.o.logger.warn({ worker: m.slot, pid: m.worker.process.pid, err: (err as Error).message }, "worker did not answer a metrics snapshot");
        }
      }),
    );
    return answered;
  }

  /** The group's /metrics text. */
  async text(): Promise<string> {
    const answered = await this.collect();
    const lists: MetricJson[][] = [];
    const calls: Value[] = [];
    for (const m of this.o.members()) {
      const snap = this.snapshots.get(m.worker.id);
      if (!snap) continue;
      const fresh = answered.has(m.slot);
      lists.push(workerView(snap.metrics, m.slot, fresh));
      const n = snap.metrics.find((x) => x.name === "sluice_should_rate_limit_duration_seconds")?.values.find((v) => v.metricName === CALLS_COUNT);
      if (n) calls.push({ labels: { ...this.o.labels, worker: m.slot }, value: n.value });
    }
    lists.push(carriedView(this.carried));
    lists.push(this.own(answered, calls));
    return AggregatorRegistry.aggregate(lists).metrics();
  }

  /** The primary's own figures about its workers. */
  private own(answered: Map<number, Member>, calls: Value[]): MetricJson[] {
    const slots = [...this.scrapeFailures.keys()];
    const perSlot = (value: (slot: number) => number) => slots.map((slot) => ({ labels: { ...this.o.labels, worker: slot }, value: value(slot) }));
    return [
      {
        name: "sluice_worker_scrape_ok",
        help: "1 when the worker answered this scrape in time, else 0 (its counters then count from its last snapshot)",
        type: "gauge",
        aggregator: "sum",
        values: perSlot((s) => (answered.has(s) ? 1 : 0)),
      },
      {
        name: "sluice_worker_scrape_failures_total",
        help: `Metrics snapshots the worker did not answer within ${this.o.timeoutMs ?? SCRAPE_TIMEOUT_MS} ms`,
        type: "counter",
        aggregator: "sum",
        values: perSlot((s) => this.scrapeFailures.get(s) ?? 0),
      },
      {
        name: "sluice_worker_exits_total",
        help: "Worker processes that exited in this slot (the primary restarts one that dies)",
        type: "counter",
        aggregator: "sum",
        values: perSlot((s) => this.exits.get(s) ?? 0),
      },
      {
        name: "sluice_worker_calls_total",
        help: "ShouldRateLimit calls answered by the worker process now in the slot (starts at 0 when it is restarted); the group's total is in sluice_decisions_total",
        type: "counter",
        aggregator: "sum",
        values: calls,
      },
    ];
  }
}
