// The reference write-up's sizing (its Step 3; docs/benchmarks.md), from measured figures instead of assumed ones.
//   Redis servers = ceil(peak / (checks one server runs per second x busy)); memory = clients x bytes.

/**
 * m: { redisUsPerCheck, bytesPerClient, sluiceRpsPerCore } (measured); plan: { peak, clients, busy }.
 * A check is one request (one script call, whatever its number of descriptors), as in the reference write-up.
 */
export function sizing(m, plan) {
  const out = { ...plan, measured: m };
  if (m.redisUsPerCheck > 0) {
    const perServerMax = 1e6 / m.redisUsPerCheck;
    const perServerAtBusy = perServerMax * plan.busy;
    const servers = Math.ceil(plan.peak / perServerAtBusy);
    out.redis = {
      checksPerServerMax: Math.round(perServerMax),
      checksPerServerAtBusy: Math.round(perServerAtBusy),
      servers,
      checksPerServer: Math.round(plan.peak / servers),
      busyPerServer: plan.peak / servers / perServerMax,
    };
    if (m.bytesPerClient > 0) {
      out.redis.memoryTotalBytes = plan.clients * m.bytesPerClient;
      out.redis.memoryPerServerBytes = out.redis.memoryTotalBytes / servers;
    }
  }
  if (m.sluiceRpsPerCore > 0) {
    out.sluice = {
      cores: Math.ceil(plan.peak / m.sluiceRpsPerCore),
      coresAtBusy: Math.ceil(plan.peak / (m.sluiceRpsPerCore * plan.busy)),
    };
  }
  return out;
}

const n = (x) => Math.round(x).toLocaleString("en-US");
const mb = (b) => (b >= 1e9 ? `${(b / 1e9).toFixed(2)} GB` : `${(b / 1e6).toFixed(0)} MB`);

export function formatSizing(s) {
  const lines = [`Sizing for a peak of ${n(s.peak)} checks/s and ${n(s.clients)} tracked clients, ${Math.round(s.busy * 100)} % busy:`];
  const m = s.measured;
  if (s.redis) {
    lines.push(
      `  measured: ${m.redisUsPerCheck.toFixed(1)} us of Redis time per check (${m.redisSource}); one Redis server runs ${n(s.redis.checksPerServerMax)} checks/s at 100 %, ${n(s.redis.checksPerServerAtBusy)} at ${Math.round(s.busy * 100)} %`,
      `  Redis servers: ${n(s.peak)} / ${n(s.redis.checksPerServerAtBusy)} -> ${s.redis.servers}, each taking ${n(s.redis.checksPerServer)} checks/s (${(s.redis.busyPerServer * 100).toFixed(1)} % busy)`,
    );
    if (s.redis.memoryTotalBytes) {
      lines.push(
        `  memory: ${n(s.clients)} x ${m.bytesPerClient.toFixed(0)} bytes (${m.bytesSource ?? "measured per key; one bucket per client, as in the reference write-up"}) = ${mb(s.redis.memoryTotalBytes)} in all, ${mb(s.redis.memoryPerServerBytes)} per server`,
      );
    }
  } else lines.push("  Redis: no Redis measurement in this run");
  if (s.sluice) {
    lines.push(
      `  sluice: ${n(m.sluiceRpsPerCore)} checks/s per core (${m.sluiceSource}) -> ${s.sluice.cores} cores at 100 %, ${s.sluice.coresAtBusy} at ${Math.round(s.busy * 100)} % (one worker per core)`,
    );
  }
  return lines.join("\n");
}
