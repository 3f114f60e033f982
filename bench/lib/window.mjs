// One full-load window with the CPU the measured server used (and Redis's CPU and script calls, and
// sluice's own counters) over its measured part: used by the scenario runs (run.mjs).
import { cpuSeconds } from "./cpu.mjs";
import { measure } from "./load.mjs";
import { snapshot } from "./redis.mjs";
import { counterDelta } from "./sluice-metrics.mjs";

/**
 * A full-load run, with the CPU the server's processes and Redis used during the measured window:
 * requests per CPU-second is the server's per-core throughput on a machine it shares with the
 * generator and Redis.
 */
export async function measureWithCpu(o, pid, redisNodes, counters) {
  const sample = async () => ({
    at: performance.now(),
    sluice: cpuSeconds(pid),
    redis: redisNodes.length ? await snapshot(redisNodes) : undefined,
    counters: counters ? await counters() : undefined,
  });
  const margin = Math.min(0.25, o.durationS / 10);
  let first, last;
  // A scrape of a loaded sluice can end after the load does: wait for samples under way, or the
  // window's counters (policy share, loop delay, GC) would be missing. A failed one leaves them "-".
  const pending = [];
  const at = (s, set) => setTimeout(() => pending.push(sample().then(set, () => undefined)), s * 1000);
  const timers = [at(o.warmupS + margin, (x) => (first = x)), at(o.warmupS + o.durationS - margin, (x) => (last = x))];
  const r = await measure(o);
  timers.forEach(clearTimeout);
  await Promise.all(pending);
  if (first && last) {
    const seconds = (last.at - first.at) / 1000;
    r.sluiceCpuCores = (last.sluice - first.sluice) / seconds; // the server measured (sluice or the baseline)
    r.rpsPerCore = r.rps / r.sluiceCpuCores;
    r.cpuUsPerCall = 1e6 / r.rpsPerCore;
    if (redisNodes.length) r.redisCpuUsPerRequest = ((last.redis.cpuSeconds - first.redis.cpuSeconds) * 1e6) / (r.rps * seconds);
    // Over the same window as the CPU figures, so comparable with rps x seconds.
    if (counters) r.counters = { ...counterDelta(first.counters, last.counters), seconds };
    if (redisNodes.length) {
      // Requests sluice answered between the two scrapes where it counted them, else the window's share of the run.
      const answered = r.counters?.decisions > 0 ? r.counters.decisions : r.rps * seconds;
      r.redisCallsPerRequest = (last.redis.scriptCalls - first.redis.scriptCalls) / answered;
      r.redisCommandsPerRequest = (last.redis.commands - first.redis.commands) / answered;
    }
  }
  return r;
}
