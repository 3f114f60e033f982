// Calendar periods of quotas in UTC. A quota check carries two adjacent periods around the local
// clock (the current one and the nearer neighbour); the store picks by its own clock, so a skew of
// up to half a period between app servers and Redis still counts in the right period.
import type { QuotaPeriod } from "./limit.js";

export interface Period {
  /** In key names: 2026-10 (month) or 2026-10-31 (day). */
  label: string;
  startMs: number;
  endMs: number;
}

interface PeriodPair {
  first: Period;
  second: Period;
}

function periodAt(kind: QuotaPeriod, ms: number): Period {
  const d = new Date(ms);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const mm = String(m + 1).padStart(2, "0");
  if (kind === "month") {
    return { label: `${y}-${mm}`, startMs: Date.UTC(y, m, 1), endMs: Date.UTC(y, m + 1, 1) };
  }
  const day = d.getUTCDate();
  return { label: `${y}-${mm}-${String(day).padStart(2, "0")}`, startMs: Date.UTC(y, m, day), endMs: Date.UTC(y, m, day + 1) };
}

/** Remembers the current period so that most calls do no date arithmetic. */
export class PeriodCache {
  private current: { kind: QuotaPeriod; cur: Period; prev: Period; next: Period; midMs: number } | undefined;

  constructor(private readonly kind: QuotaPeriod) {}

  pairAt(nowMs: number): PeriodPair {
    let c = this.current;
    if (!c || nowMs < c.cur.startMs || nowMs >= c.cur.endMs) {
      const cur = periodAt(this.kind, nowMs);
      c = this.current = {
        kind: this.kind,
        cur,
        prev: periodAt(this.kind, cur.startMs - 1),
        next: periodAt(this.kind, cur.endMs),
        midMs: (cur.startMs + cur.endMs) / 2,
      };
    }
    return nowMs < c.midMs ? { first: c.prev, second: c.cur } : { first: c.cur, second: c.next };
  }
}
