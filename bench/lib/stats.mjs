// Latency percentiles from raw samples (microseconds).
export function percentiles(samples) {
  if (samples.length === 0) return { p50: null, p99: null, p999: null, max: null, mean: null, n: 0 };
  const s = Float64Array.from(samples).sort();
  const at = (q) => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
  let sum = 0;
  for (const x of s) sum += x;
  return { p50: at(0.5), p99: at(0.99), p999: at(0.999), max: s[s.length - 1], mean: sum / s.length, n: s.length };
}
