// The printed tables: throughput and latency against the baseline, then what Redis did per request.
import { DESCRIPTOR_SETS } from "./scenarios.mjs";

/** Limits checked per request (one token bucket per descriptor in every set). */
const checksPerRequest = (s) => DESCRIPTOR_SETS[s.set]("0").length;

function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join("  ");
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

const ms = (us) => (us == null ? "-" : (us / 1000).toFixed(us < 10_000 ? 2 : 1));
const lat = (r) => (r ? `${ms(r.latencyUs.p50)}/${ms(r.latencyUs.p99)}/${ms(r.latencyUs.p999)}` : "-");
const int = (x) => (x == null || Number.isNaN(x) ? "-" : Math.round(x).toLocaleString("en-US"));
const fix = (x, d = 2) => (x == null || Number.isNaN(x) ? "-" : x.toFixed(d));

/** Share of OVER_LIMIT answers: from the full-load run when the generator saw codes, else from 100 calls after it. */
function refusedShare(s) {
  const r = s.sluice.full.overLimit != null ? s.sluice.full : s.answers?.after;
  if (!r) return "-";
  const total = r.ok + r.overLimit;
  return total > 0 ? `${Math.round((100 * r.overLimit) / total)}%` : "-";
}

/**
 * Limits answered by sluice's failure policy (store failed or slower than the store timeout) over the
 * full-load window and in the half-load run, as a share of all limits checked; "-" where not read.
 */
function policyShare(s) {
  const share = (c, requests) => (c && requests > 0 ? `${((100 * c.policy) / (requests * checksPerRequest(s))).toFixed(c.policy === 0 ? 0 : 2)}%` : "-");
  const full = s.sluice.full.counters;
  return `${share(full, full ? s.sluice.full.rps * full.seconds : 0)}/${share(s.sluice.half.counters, s.sluice.half.done)}`;
}

/** A figure in ms: 2 significant digits under 10, whole above; "+Inf" (over the last bucket) as ">1000". */
const msFig = (x, top = 1000) => (x == null ? "-" : x === "+Inf" ? `>${top}` : x < 10 ? x.toPrecision(2) : String(Math.round(x)));
/** A bucket bound in ms as the histogram has it. */
const bound = (x) => (x == null ? "-" : x === "+Inf" ? ">1000" : String(x));

/** Event-loop delay p99 (ms) at full/half load, from sluice's histogram between two scrapes; "-" where not read. */
function loopP99(s) {
  const one = (e) => (!e || !(e.samples > 0) ? "-" : e.maxBoundMs === "+Inf" && e.p99Ms >= 1000 ? ">1000" : msFig(e.p99Ms));
  return `${one(s.sluice.full.counters?.eventLoop)}/${one(s.sluice.half.counters?.eventLoop)}`;
}

/** GC pauses of sluice in a run: count/total ms/highest bucket bound hit (ms); "-" where not read. */
function gcPauses(c) {
  const g = c?.gc;
  if (!g) return "-";
  return g.count > 0 ? `${g.count}/${msFig(g.ms)}/${bound(g.maxBoundMs)}` : "0/0/-";
}

/** GC pause p99 (ms, estimated from the histogram like loop p99); "-" where not read or without pauses. */
function gcP99(c) {
  const g = c?.gc;
  return g && g.count > 0 ? (g.maxBoundMs === "+Inf" && g.p99Ms >= 1000 ? ">1000" : msFig(g.p99Ms)) : "-";
}

/** Old-space growth over the window (MB, summed over workers; negative when a mark-compact freed more); "-" where not read. */
const oldGrowth = (c) => (c?.oldSpaceGrowthBytes == null ? "-" : (c.oldSpaceGrowthBytes / 1e6).toFixed(1));

export function formatScenarioTables(scenarios) {
  const ran = scenarios.filter((s) => s.sluice);
  const rows = ran.map((s) => [
    s.id,
    s.generator,
    s.workers,
    int(s.sluice.full.rps),
    int(s.baseline.full.rps),
    fix(s.ratio),
    lat(s.sluice.full),
    lat(s.baseline.full),
    int(s.sluice.half.rps),
    lat(s.sluice.half),
    lat(s.baseline.half),
    refusedShare(s),
    policyShare(s),
    loopP99(s),
    gcPauses(s.sluice.full.counters),
    gcPauses(s.sluice.half.counters),
    gcP99(s.sluice.full.counters),
    oldGrowth(s.sluice.full.counters),
  ]);
  const out = [
    "",
    "Throughput (req/s) and latency p50/p99/p99.9 (ms); half load = open loop (Node generator) at half of sluice's full-load rate, for both servers;",
    "policy = share of limits sluice's failure policy answered because a store call failed or outlived the store timeout (not decided by Redis);",
    "loop p99 = sluice's event-loop delay p99 (ms, estimated from its histogram over the window); GC = sluice's GC pauses: count/total ms/highest bucket bound hit (ms);",
    "GC p99 = sluice's GC pause p99 at full load (ms, estimated from its histogram); old MB = growth of sluice's V8 old space over the full-load window (MB, all workers)",
    table(
      [
        "scenario",
        "gen",
        "w",
        "sluice",
        "baseline",
        "ratio",
        "sluice full",
        "baseline full",
        "half rate",
        "sluice half",
        "baseline half",
        "refused",
        "policy full/half",
        "loop p99 full/half",
        "GC full",
        "GC half",
        "GC p99",
        "old MB",
      ],
      rows,
    ),
  ];
  const redis = ran.filter((s) => s.redis);
  if (redis.length) {
    out.push(
      "",
      "Redis per request (exact counts over the half-load run; calls/req full: script calls per request over the full-load window); server CPU at full load (sluice, and the baseline's CPU per call)",
      table(
        [
          "scenario",
          "calls/req full",
          "cmds/req",
          "scripts/req",
          "scripts/s",
          "script us/call",
          "Redis CPU us/req half",
          "full",
          "per check",
          "keys",
          "bytes/key",
          "MEMORY USAGE",
          "sluice cores",
          "req/s per core",
          "CPU us/call",
          "baseline",
        ],
        redis.map((s) => [
          s.id,
          fix(s.redisCallsPerRequest, 4),
          fix(s.redis.commandsPerRequest, 3),
          fix(s.redis.scriptCallsPerRequest, 3),
          fix(s.redis.scriptCallsPerSecond, 1),
          fix(s.redis.scriptUsPerCall, 1),
          fix(s.redis.cpuUsPerRequest, 1),
          fix(s.redis.fullLoadCpuUsPerRequest, 1),
          fix(s.redis.fullLoadCpuUsPerRequest / checksPerRequest(s), 1),
          int(s.redis.keys),
          s.redis.bytesPerKey ? fix(s.redis.bytesPerKey, 0) : "-",
          s.redis.sampleKey ? `${s.redis.sampleKey.bytes}` : "-",
          fix(s.sluice.full.sluiceCpuCores, 2),
          int(s.sluice.full.rpsPerCore),
          fix(s.sluice.full.cpuUsPerCall, 0),
          fix(s.baseline.full.cpuUsPerCall, 0),
        ]),
      ),
    );
  }
  const memory = ran.filter((s) => !s.redis);
  if (memory.length) {
    out.push(
      "",
      "sluice CPU at full load: " +
        memory
          .map(
            (s) =>
              `${s.id} ${fix(s.sluice.full.sluiceCpuCores)} cores, ${int(s.sluice.full.rpsPerCore)} req/s per core, ${fix(s.sluice.full.cpuUsPerCall, 0)} us/call (baseline ${fix(s.baseline.full.cpuUsPerCall, 0)})`,
          )
          .join("; "),
    );
  }
  const other = scenarios.filter((s) => !s.sluice);
  if (other.length) out.push("", ...other.map((s) => `${s.id}: ${s.skipped ? "skipped: " + s.skipped : "failed: " + s.failed}`));
  return out.join("\n");
}
