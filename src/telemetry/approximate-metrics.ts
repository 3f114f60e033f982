// Metrics of approximate limits (leases): lease calls and their keys and latency, leases taken, refusals
// learnt, units given back to the store, units held unused, and answers decided here from leases.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { LeaseCallObserver, Leases } from "../approximate/leases.js";

/** Registers the metrics; returns the observer the leases report each store call to. */
export function approximateMetrics(registry: Registry, leases: () => Leases | undefined): LeaseCallObserver {
  const registers = [registry];
  const calls = new Counter({
    name: "sluice_approximate_lease_calls_total",
    help: "Store calls of approximate limits (leases taken and units given back, many keys per call), by result (ok, error)",
    labelNames: ["result"],
    registers,
  });
  const keys = new Histogram({
    name: "sluice_approximate_lease_call_keys",
    help: "Keys per store call of approximate limits",
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500],
    registers,
  });
  const seconds = new Histogram({
    name: "sluice_approximate_lease_call_duration_seconds",
    help: "Time of a store call of approximate limits, answered or failed",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers,
  });
  const counter = (name: string, help: string, read: (l: Leases) => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        const l = leases();
        this.inc(l ? read(l) : 0);
      },
    });
  counter("sluice_approximate_leases_total", "Leases of approximate limits taken from the store (keys given units)", (l) => l.leasesTaken);
  counter(
    "sluice_approximate_refusals_total",
    "Refusals of approximate limits learnt from the store (remembered until their Retry-After, one lease interval at most)",
    (l) => l.refusals,
  );
  counter("sluice_approximate_units_returned_total", "Unused units of approximate limits given back to the store", (l) => l.unitsReturned);
  counter(
    "sluice_approximate_decisions_total",
    "Approximate limits answered from this instance's leases or remembered refusals, without a store call",
    (l) => l.decisions,
  );
  new Gauge({
    name: "sluice_approximate_leased_units",
    help: "Units of approximate limits held in this instance's leases and not used",
    registers,
    collect() {
      this.set(leases()?.leasedUnits ?? 0);
    },
  });
  return (ok, n, s) => {
    calls.inc({ result: ok ? "ok" : "error" });
    keys.observe(n);
    seconds.observe(s);
  };
}
