// This process's own stalls, seen by a 5 ms ticker: on a host whose cores are all taken by other work, an answer
// that waited on them here is not the server's latency, and the server and Redis were starved too.
export interface StallWatch {
  /** Stalls longer than minMs so far, as [from, to] in performance.now() ms. */
  stalls: { from: number; to: number }[];
  /** Their total length. */
  stalledMs(): number;
  /** Whether the interval [from, to] overlaps a stall. */
  overlaps(from: number, to: number): boolean;
  /** How much of the interval [from, to] was stalled, in ms. */
  overlapMs(from: number, to: number): number;
  stop(): void;
}

export function watchStalls(minMs = 20): StallWatch {
  const stalls: { from: number; to: number }[] = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    if (now - last > minMs) stalls.push({ from: last, to: now });
    last = now;
  }, 5);
  return {
    stalls,
    stalledMs: () => stalls.reduce((n, s) => n + s.to - s.from, 0),
    overlaps: (from, to) => stalls.some((s) => s.to > from && s.from < to),
    overlapMs: (from, to) => stalls.reduce((n, s) => n + Math.max(0, Math.min(s.to, to) - Math.max(s.from, from)), 0),
    stop: () => clearInterval(timer),
  };
}
