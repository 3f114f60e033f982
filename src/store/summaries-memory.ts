// Summaries in this process (the memory store's own): HyperLogLogs like Redis's (16,384 registers,
// about 0.8 % standard error) and bounded count maps, with expiry and a bound on the number of keys.
import { hash } from "node:crypto";
import type { Clock } from "./clock.js";
import { topCounts, type SummaryRead, type SummaryStore, type SummaryValue, type SummaryWrite } from "./summaries.js";

const P = 14;
const M = 1 << P;
const ALPHA = 0.7213 / (1 + 1.079 / M);
/** Summary keys held at most (the oldest goes first): a window's keys per rule, for a bounded number of rules. */
const MEMORY_SUMMARY_MAX_KEYS = 20_000;

interface Entry {
  expiresAtMs: number;
  registers?: Uint8Array;
  counts?: Map<string, number>;
}

export class MemorySummaries implements SummaryStore {
  private readonly keys = new Map<string, Entry>();

  constructor(
    private readonly clock: Clock,
    private readonly maxKeys = MEMORY_SUMMARY_MAX_KEYS,
  ) {}

  async writeSummaries(_group: number, writes: readonly SummaryWrite[]): Promise<void> {
    const now = this.nowMs();
    for (const [k, e] of this.keys) if (e.expiresAtMs <= now) this.keys.delete(k);
    for (const w of writes) {
      if (w.members.length === 0) continue;
      let e = this.keys.get(w.key);
      if (!e) {
        e = { expiresAtMs: 0 };
        this.keys.set(w.key, e);
        if (this.keys.size > this.maxKeys) this.keys.delete(this.keys.keys().next().value!);
      }
      e.expiresAtMs = now + w.ttlSeconds * 1000;
      if (w.kind === "distinct") {
        const r = (e.registers ??= new Uint8Array(M));
        for (const m of w.members) addToRegisters(r, m);
      } else {
        const c = (e.counts ??= new Map());
        for (let i = 0; i < w.members.length; i++) c.set(w.members[i], (c.get(w.members[i]) ?? 0) + w.counts[i]);
        if (c.size > w.keep) {
          const kept = topCounts([...c], w.keep);
          c.clear();
          for (const [m, n] of kept) c.set(m, n);
        }
      }
    }
  }

  async readSummaries(_group: number, reads: readonly SummaryRead[]): Promise<SummaryValue[]> {
    const now = this.nowMs();
    const live = (key: string) => {
      const e = this.keys.get(key);
      return e && e.expiresAtMs > now ? e : undefined;
    };
    return reads.map((r) => {
      if (r.kind === "distinct") {
        const union = new Uint8Array(M);
        for (const k of r.keys) {
          const regs = live(k)?.registers;
          if (regs) for (let i = 0; i < M; i++) if (regs[i] > union[i]) union[i] = regs[i];
        }
        return estimate(union);
      }
      const sum = new Map<string, number>();
      for (const k of r.keys) for (const [m, n] of live(k)?.counts ?? []) sum.set(m, (sum.get(m) ?? 0) + n);
      return topCounts([...sum], r.n);
    });
  }

  private nowMs(): number {
    return Math.floor(this.clock.nowMicros() / 1000);
  }
}

function addToRegisters(r: Uint8Array, member: string): void {
  const h = hash("sha1", member, "buffer");
  const index = h.readUInt16BE(0) >>> (16 - P);
  // The remaining bits: the position of the first 1 after the index bits (at most 64 - P + 1).
  const rest = (BigInt(h.readUInt32BE(0) & ((1 << (32 - P)) - 1)) << 32n) | BigInt(h.readUInt32BE(4));
  const width = 64 - P;
  let rank = 1;
  while (rank <= width && ((rest >> BigInt(width - rank)) & 1n) === 0n) rank++;
  if (rank > r[index]) r[index] = rank;
}

function estimate(r: Uint8Array): number {
  let sum = 0;
  let zeros = 0;
  for (let i = 0; i < M; i++) {
    sum += 2 ** -r[i];
    if (r[i] === 0) zeros++;
  }
  const e = (ALPHA * M * M) / sum;
  return Math.round(e <= 2.5 * M && zeros > 0 ? M * Math.log(M / zeros) : e);
}
