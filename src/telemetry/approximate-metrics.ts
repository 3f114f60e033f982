// Metrics of approximate limits: sync calls and their keys and latency, hits not yet acknowledged by
// the store, and answers decided from the local view.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { ApproximateCounters, SyncObserver } from "../approximate/approximate-counters.js";

/** Registers the metrics; returns the observer the counters report each sync call to. */
export function approximateMetrics(registry: Registry, counters: () => ApproximateCounters | undefined): SyncObserver {
  const registers = [registry];
  const syncs = new Counter({
    name: "sluice_approximate_syncs_total",
    help: "Sync calls of approximate limits, by result (ok, error)",
    labelNames: ["result"],
    registers,
  });
  const keys = new Histogram({
    name: "sluice_approximate_sync_keys",
    help: "Keys sent per sync call of approximate limits",
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500],
    registers,
  });
  const seconds = new Histogram({
    name: "sluice_approximate_sync_duration_seconds",
    help: "Time of a sync call of approximate limits, answered or failed",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers,
  });
  new Gauge({
    name: "sluice_approximate_pending_hits",
    help: "Hits of approximate limits admitted here and not yet acknowledged by the store",
    registers,
    collect() {
      this.set(counters()?.pendingHits ?? 0);
    },
  });
  new Counter({
    name: "sluice_approximate_decisions_total",
    help: "Limits of requests decided from this instance's view (approximate limits)",
    registers,
    collect() {
      this.reset();
      this.inc(counters()?.decisions ?? 0);
    },
  });
  return (ok, n, s) => {
    syncs.inc({ result: ok ? "ok" : "error" });
    keys.observe(n);
    seconds.observe(s);
  };
}
