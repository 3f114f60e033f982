// Metrics of the RLQS service (src/rlqs/): streams open, buckets, assignments sent, DENY_ALL answers, abandons,
// units leased and given back, store calls, denied requests Envoy reported. Read from the service's counters at
// each scrape (the shape is restated here: telemetry/ sits below rlqs/).
import { Counter, Gauge, type Registry } from "prom-client";

export interface RlqsCounterSource {
  streamsOpen: number;
  buckets: number;
  assignmentsSent: number;
  denyAllSent: number;
  abandonsSent: number;
  unitsLeased: number;
  unitsReturned: number;
  storeCalls: number;
  deniedReported: number;
}

export function rlqsMetrics(registry: Registry, counters: () => RlqsCounterSource): void {
  const registers = [registry];
  const gauge = (name: string, help: string, read: (c: RlqsCounterSource) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read(counters()));
      },
    });
  const counter = (name: string, help: string, read: (c: RlqsCounterSource) => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(read(counters()));
      },
    });
  gauge("sluice_rlqs_streams_open", "RLQS streams open (one per Envoy filter config)", (c) => c.streamsOpen);
  gauge("sluice_rlqs_buckets", "RLQS buckets reported on the open streams", (c) => c.buckets);
  counter("sluice_rlqs_assignments_total", "RLQS quota assignments sent (token buckets and blanket rules)", (c) => c.assignmentsSent);
  counter("sluice_rlqs_deny_all_total", "RLQS DENY_ALL assignments sent (at the limit, a limit of 0, or failure_mode deny)", (c) => c.denyAllSent);
  counter("sluice_rlqs_abandons_total", "RLQS abandon_action answers sent (a bucket unused, or its rule removed)", (c) => c.abandonsSent);
  counter("sluice_rlqs_units_leased_total", "Units taken from the store for RLQS assignments", (c) => c.unitsLeased);
  counter("sluice_rlqs_units_returned_total", "Unused units of RLQS assignments given back to the store", (c) => c.unitsReturned);
  counter("sluice_rlqs_store_calls_total", "Store calls of the RLQS service (leases taken and units given back)", (c) => c.storeCalls);
  counter("sluice_rlqs_denied_reported_total", "Requests Envoy reported denied in RLQS usage reports", (c) => c.deniedReported);
}
