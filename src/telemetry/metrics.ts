// Prometheus metrics for /metrics: per-rule decisions, call latency, store health, config loads and
// process metrics, in one registry owned by the caller (no global). Hot-path counts are plain numbers
// (rule-counters.ts) and array histograms (array-histogram.ts); they become series when Prometheus scrapes.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { SecretValues } from "../core/secret.js";
import type { Decision, RateLimitRequest } from "../limiter/types.js";
import type { CompileStats } from "../rules/load.js";
import type { RuleSet } from "../rules/model.js";
import type { ClusterEvents } from "../store/redis-cluster.js";
import type { ScriptErrorKind } from "../store/script-errors.js";
import type { StoreStatus } from "../store/store.js";
import type { CutReason, CutScope } from "./call-tracing.js";
import { ArrayHistogram, type HistogramSeries } from "./array-histogram.js";
import { EventLoopMetrics } from "./event-loop.js";
import { DEFAULT_NEAR_LIMIT_RATIO, DETAILED_VALUES_PER_RULE, RuleCounters, type RuleCounts } from "./rule-counters.js";

/** Seconds; a ShouldRateLimit call is expected well under Envoy's 20 ms timeout. */
const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1];
/** Requests for domains that are not in the rules share one label value. */
const UNKNOWN_DOMAIN = "_unknown_";

interface MetricsSources {
  /** The rules in force (for zero series of every rule and for telling known domains). */
  rules(): RuleSet;
  store(): StoreStatus;
  denyNotes(): number;
}

interface MetricsOptions {
  detailedValuesPerRule?: number;
  /** Node.js process metrics (process_*, nodejs_*); off in unit tests that compare whole outputs. */
  processMetrics?: boolean;
  /** near_limit counts hits past floor(limit x this) (SLUICE_NEAR_LIMIT_RATIO; default 0.8). */
  nearLimitRatio?: number;
  /** Keep the reference's stats keys per rule too (the statsd sink reads them; statsd.ts). */
  statKeys?: boolean;
  /** Secret keys' values (detailed_metric labels, rule paths holding one) show as their keyed hash. */
  secrets?: SecretValues;
}

/** Label names and help of the per-rule counters, with the reference stat each one maps to. */
const RULE_COUNTERS: { name: string; field: keyof RuleCounts; help: string | ((ratio: number) => string) }[] = [
  { name: "sluice_rule_hits_total", field: "hits", help: "Hits checked against the limit (reference: total_hits)" },
  { name: "sluice_rule_over_limit_total", field: "overLimit", help: "Hits refused by the limit (reference: over_limit; shadow limits count in shadow_mode)" },
  {
    name: "sluice_rule_near_limit_total",
    field: "nearLimit",
    help: (ratio) => `Allowed hits past floor(limit x ${ratio}) of their window or bucket (reference: near_limit, NEAR_LIMIT_RATIO)`,
  },
  { name: "sluice_rule_within_limit_total", field: "withinLimit", help: "Hits the limit allowed, near_limit included (reference: within_limit)" },
  { name: "sluice_rule_shadow_mode_total", field: "shadowMode", help: "Hits a shadow_mode limit would have refused (reference: shadow_mode)" },
  {
    name: "sluice_rule_over_limit_with_local_cache_total",
    field: "overLimitWithLocalCache",
    help: "Hits refused from the deny note without a store call, also in over_limit (reference: over_limit_with_local_cache)",
  },
];
const RULE_LABELS = ["domain", "rule", "limit", "descriptor"] as const;

export class Metrics {
  readonly registry = new Registry();
  readonly rules: RuleCounters;
  /** Per domain: answers by code, and OKs that global shadow mode turned from a refusal. */
  private readonly decisions = new Map<string, { ok: number; over: number; shadowed: number }>();
  private readonly duration: HistogramSeries;
  private readonly errors: Counter;
  private readonly storeDuration: ArrayHistogram;
  private readonly storeErrors: Counter;
  private readonly scriptErrors: Counter;
  private readonly configLoads: Counter;
  private readonly connectionsClosed: Counter;
  private readonly streamsReset: Counter;
  private readonly configLastSuccess: Gauge;
  private readonly reloadDuration: Gauge;
  private readonly reloadMainThread: Gauge;
  /** Event-loop delay and GC pauses, with the process metrics. */
  private readonly eventLoop?: EventLoopMetrics;

  private readonly src: MetricsSources;

  constructor(src: MetricsSources, o: MetricsOptions = {}) {
    this.src = src;
    const nearLimitRatio = o.nearLimitRatio ?? DEFAULT_NEAR_LIMIT_RATIO;
    this.rules = new RuleCounters(o.detailedValuesPerRule ?? DETAILED_VALUES_PER_RULE, o.statKeys ?? false, nearLimitRatio, o.secrets);
    const registers = [this.registry];
    const rules = this.rules;

    for (const def of RULE_COUNTERS) {
      new Counter({
        name: def.name,
        help: typeof def.help === "function" ? def.help(nearLimitRatio) : def.help,
        labelNames: RULE_LABELS,
        registers,
        collect() {
          this.reset();
          for (const c of rules.all()) this.inc(ruleLabels(c), c[def.field] as number);
        },
      });
    }
    new Counter({
      name: "sluice_rule_failure_policy_decisions_total",
      help: "Limits answered by their failure_mode because the store failed or was too slow, by mode",
      labelNames: [...RULE_LABELS, "mode"],
      registers,
      collect() {
        this.reset();
        for (const c of rules.all()) {
          const l = ruleLabels(c);
          // Only modes that happened: most rules never see a store failure.
          if (c.policyAllow > 0) this.inc({ ...l, mode: "allow" }, c.policyAllow);
          if (c.policyDeny > 0) this.inc({ ...l, mode: "deny" }, c.policyDeny);
          if (c.policyLocal > 0) this.inc({ ...l, mode: "local" }, c.policyLocal);
        }
      },
    });

    const decisions = this.decisions;
    new Counter({
      name: "sluice_decisions_total",
      help: "ShouldRateLimit answers by domain and overall code",
      labelNames: ["domain", "code"],
      registers,
      collect() {
        this.reset();
        for (const domain of src.rules().domains.keys()) if (!decisions.has(domain)) decisions.set(domain, { ok: 0, over: 0, shadowed: 0 });
        for (const [domain, n] of decisions) {
          this.inc({ domain, code: "OK" }, n.ok);
          this.inc({ domain, code: "OVER_LIMIT" }, n.over);
        }
      },
    });
    new Counter({
      name: "sluice_global_shadow_mode_total",
      help: "OK answers that global shadow mode (SHADOW_MODE) gave to requests the limits refuse, by domain; also in sluice_decisions_total code OK (reference: global_shadow_mode)",
      labelNames: ["domain"],
      registers,
      collect() {
        this.reset();
        for (const domain of src.rules().domains.keys()) if (!decisions.has(domain)) decisions.set(domain, { ok: 0, over: 0, shadowed: 0 });
        for (const [domain, n] of decisions) this.inc({ domain }, n.shadowed);
      },
    });
    this.errors = new Counter({
      name: "sluice_request_errors_total",
      help: "ShouldRateLimit calls answered with a gRPC error, by code (invalid_argument, unavailable, internal)",
      labelNames: ["code"],
      registers,
    });
    for (const code of ["invalid_argument", "unavailable", "internal"]) this.errors.inc({ code }, 0);
    this.duration = new ArrayHistogram({
      name: "sluice_should_rate_limit_duration_seconds",
      help: "ShouldRateLimit time from decoding to answer, errors included",
      buckets: LATENCY_BUCKETS,
      registers,
    }).series();

    this.storeDuration = new ArrayHistogram({
      name: "sluice_store_call_duration_seconds",
      help: "Redis script calls (decision and refund) by node, failures included",
      labelName: "node",
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.storeErrors = new Counter({
      name: "sluice_store_errors_total",
      help: "Redis script calls that failed (connection, timeout, error reply) by node",
      labelNames: ["node"],
      registers,
      collect() {
        for (const n of src.store().nodes) this.inc({ node: n.id }, 0); // every node shows, 0 until it fails
      },
    });
    this.scriptErrors = new Counter({
      name: "sluice_store_script_errors_total",
      help: "Error replies of Redis to sluice's scripts and commands, by node, Redis's error code (NOPERM for any ACL refusal, OOM, BUSY ...) and the command refused (unknown when Redis does not say)",
      labelNames: ["node", "code", "command"],
      registers,
    });
    new Gauge({
      name: "sluice_store_node_up",
      help: "1 when the store node is connected and its circuit closed, else 0",
      labelNames: ["node"],
      registers,
      collect() {
        this.reset();
        for (const n of src.store().nodes) this.set({ node: n.id }, n.state === "up" ? 1 : 0);
      },
    });
    new Gauge({
      name: "sluice_store_calls_in_flight",
      help: "Script calls sent to the store node and waiting for its reply",
      labelNames: ["node"],
      registers,
      collect() {
        this.reset();
        for (const n of src.store().nodes) this.set({ node: n.id }, n.inFlight);
      },
    });
    new Gauge({
      name: "sluice_store_circuit_open",
      help: "1 while the node's circuit breaker is open (calls fail at once and the failure policy answers)",
      labelNames: ["node"],
      registers,
      collect() {
        this.reset();
        for (const n of src.store().nodes) this.set({ node: n.id }, n.state === "circuit_open" ? 1 : 0);
      },
    });
    new Gauge({
      name: "sluice_deny_notes",
      help: "Keys currently refused from memory without a store call (the deny note)",
      registers,
      collect() {
        this.set(src.denyNotes());
      },
    });

    this.connectionsClosed = new Counter({
      name: "sluice_grpc_connections_closed_total",
      help: "gRPC connections sluice closed to bound what a client holds, by reason: max_connections (refused past the cap), held_bytes (its window held back too many calls, and no answer was taken for 2 s)",
      labelNames: ["reason"],
      registers,
    });
    this.streamsReset = new Counter({
      name: "sluice_grpc_streams_reset_total",
      help: "gRPC calls sluice reset to bound what a client holds, by reason: write_timeout (the answer was not taken in time), held_bytes (refused by sluice while the connection's window holds back too many calls)",
      labelNames: ["reason"],
      registers,
    });
    for (const reason of ["max_connections", "held_bytes"]) this.connectionsClosed.inc({ reason }, 0);
    for (const reason of ["write_timeout", "held_bytes"]) this.streamsReset.inc({ reason }, 0);

    this.configLoads = new Counter({
      name: "sluice_config_loads_total",
      help: "Rule loads (start and reloads, from the directory or the xDS server) by result: success, or error (the last good rules keep serving)",
      labelNames: ["result"],
      registers,
    });
    this.configLoads.inc({ result: "success" }, 0);
    this.configLoads.inc({ result: "error" }, 0);
    this.configLastSuccess = new Gauge({
      name: "sluice_config_last_success_timestamp_seconds",
      help: "When the rules in force were loaded (Unix time)",
      registers,
    });
    this.reloadDuration = new Gauge({
      name: "sluice_config_load_duration_seconds",
      help: "The last rule load (start or reload, valid or refused): from reading the rules to the new set ready, parsed in a child process",
      registers,
    });
    this.reloadMainThread = new Gauge({
      name: "sluice_config_load_main_thread_seconds",
      help: "The last rule load's cost to the event loop in CPU time (building the changed domains and the swap, in steps), by part: total, or the longest step (what a call waited for it at most)",
      labelNames: ["part"],
      registers,
    });
    new Gauge({
      name: "sluice_config_rules",
      help: "Descriptors carrying a limit in the rules in force, by domain",
      labelNames: ["domain"],
      registers,
      collect() {
        this.reset();
        for (const [domain, d] of src.rules().domains) this.set({ domain }, d.ruleCount);
      },
    });

    if (o.processMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry });
      this.eventLoop = new EventLoopMetrics(this.registry);
    }
  }

  /** A decided ShouldRateLimit call. */
  decided(req: RateLimitRequest, decision: Decision, seconds: number): void {
    this.duration.observe(seconds);
    this.rules.observe(req, decision);
    const domain = this.src.rules().domains.has(req.domain) ? req.domain : UNKNOWN_DOMAIN;
    let n = this.decisions.get(domain);
    if (!n) this.decisions.set(domain, (n = { ok: 0, over: 0, shadowed: 0 }));
    if (decision.code === "OVER_LIMIT") n.over++;
    else {
      n.ok++;
      if (decision.shadowed) n.shadowed++;
    }
  }

  /** A call answered with a gRPC error; code in snake_case (invalid_argument, unavailable, internal). */
  failed(code: string, seconds: number): void {
    this.duration.observe(seconds);
    this.errors.inc({ code });
  }

  /** The gRPC transport cut a client off to bound it (TransportOptions.onCut). */
  cut(scope: CutScope, reason: CutReason): void {
    (scope === "connection" ? this.connectionsClosed : this.streamsReset).inc({ reason });
  }

  storeCall(node: string, seconds: number, ok: boolean): void {
    this.storeDuration.observe(seconds, node);
    if (!ok) this.storeErrors.inc({ node });
  }

  /** An error reply of a store node (store/script-errors.ts): codes and commands are bounded sets. */
  scriptError(node: string, kind: ScriptErrorKind): void {
    this.scriptErrors.inc({ node, code: kind.code, command: kind.command });
  }

  /** A load of the rules: success with the rules now in force (previous: those before), or error; what it cost. */
  configLoaded(rules: RuleSet | undefined, previous?: RuleSet, stats?: CompileStats): void {
    if (stats) {
      this.reloadDuration.set(stats.durationMs / 1000);
      this.reloadMainThread.set({ part: "total" }, stats.mainThreadMs / 1000);
      this.reloadMainThread.set({ part: "longest_step" }, stats.longestStepMs / 1000);
    }
    if (!rules) {
      this.configLoads.inc({ result: "error" });
      return;
    }
    this.configLoads.inc({ result: "success" });
    this.configLastSuccess.set(Date.now() / 1000);
    this.rules.touch(rules, previous);
  }

  /**
   * The xDS subscription's counters (registered only when rules come from a control plane): responses by
   * verdict, reconnect attempts, and whether the stream is up. Rules applied also count in configLoaded.
   */
  xdsObserver(): { xdsResponse(result: "ack" | "nack"): void; xdsReconnect(): void; xdsConnected(up: boolean): void } {
    const registers = [this.registry];
    const responses = new Counter({
      name: "sluice_xds_responses_total",
      help: "Rule sets received from the xDS server, by verdict: ack (applied) or nack (refused; the last good rules keep serving)",
      labelNames: ["result"],
      registers,
    });
    responses.inc({ result: "ack" }, 0);
    responses.inc({ result: "nack" }, 0);
    const reconnects = new Counter({ name: "sluice_xds_reconnects_total", help: "Attempts to reach the xDS server again after a failure", registers });
    const connected = new Gauge({ name: "sluice_xds_connected", help: "1 while the stream to the xDS server is open", registers });
    return {
      xdsResponse: (result) => responses.inc({ result }),
      xdsReconnect: () => reconnects.inc(),
      xdsConnected: (up) => connected.set(up ? 1 : 0),
    };
  }

  /** A Redis Cluster's topology counters (registered only for a cluster store). */
  clusterEvents(): ClusterEvents {
    const registers = [this.registry];
    const refreshes = new Counter({
      name: "sluice_store_topology_refreshes_total",
      help: "Redis Cluster slot map refreshes (CLUSTER NODES asked of the reachable nodes), by result (ok: some node answered)",
      labelNames: ["result"],
      registers,
    });
    refreshes.inc({ result: "ok" }, 0);
    refreshes.inc({ result: "error" }, 0);
    const moves = new Counter({
      name: "sluice_store_slot_moves_total",
      help: "Redis Cluster slots that moved to another node in sluice's slot map",
      registers,
    });
    const failover = new Histogram({
      name: "sluice_store_failover_seconds",
      help: "From a Redis Cluster node's first trouble (connection lost, call unanswered) to the first store-decided answer on the slots it served",
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60],
      registers,
    });
    return {
      topologyRefresh: (ok) => refreshes.inc({ result: ok ? "ok" : "error" }),
      slotsMoved: (n) => moves.inc(n),
      failoverSeconds: (s) => failover.observe(s),
    };
  }

  /** Stops the event-loop and GC sampling (it holds no process open, so calling this is tidiness). */
  close(): void {
    this.eventLoop?.stop();
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

function ruleLabels(c: RuleCounts): Record<string, string> {
  const l: Record<string, string> = { domain: c.domain, rule: c.rule, limit: c.limit };
  if (c.descriptor !== undefined) l.descriptor = c.descriptor;
  return l;
}
