// Using the deny notes (deny-note.ts) for a request: answering from live notes, probing keys whose
// note expired, and learning notes from the store's refusals.
import { algorithm } from "../counters/registry.js";
import type { DenyNotes, Probe } from "./deny-note.js";
import type { Item, ProbeTicket } from "./limit-items.js";

/**
 * true when a live note speaks for every store limit of the request: the items are answered from
 * them (refused, nothing left). Else the probe in flight to wait for, when the only limits without a
 * live note are ones whose expired note another request is probing; else undefined (ask the store).
 */
export function consultNotes(notes: DenyNotes, items: Item[], generation: number, nowMs: number): true | Probe | undefined {
  let probe: Probe | undefined;
  let noted = 0;
  for (const it of items) {
    if (it.via !== "store") continue;
    const c = it.check!;
    if (it.limit.shadowMode) return undefined; // its own verdict and figures come from the store only
    // A note is about one hit: a token bucket's Retry-After for more, or a cost over the limit, differ.
    const a = algorithm(c.algorithm);
    if (it.hits > 1 && (a.retryDependsOnCost || it.hits > c.capacity)) return undefined;
    const note = notes.get(c.key, c.algorithm, c.capacity, a.limitParam(c), generation, nowMs);
    if (!note) return undefined;
    if (note.untilMs <= nowMs) {
      if (!note.probe) return undefined;
      probe ??= note.probe;
      continue;
    }
    noted++;
  }
  if (probe || noted === 0) return probe;
  for (const it of items) {
    if (it.via !== "store") continue;
    const note = notes.peek(it.check!.key)!; // matched and touched above
    it.via = "deny_note";
    it.result = {
      allowed: false,
      remaining: 0,
      resetSeconds: Math.max(Math.ceil((note.resetAtMs - nowMs) / 1000), 1),
      retryAfterMs: note.retryAtMs - nowMs,
      periodEndMs: note.periodEndMs,
    };
  }
  return true;
}

/** Keys of this request whose notes expired and nobody probes: this request asks the store for them. */
export function startProbes(notes: DenyNotes, items: Item[], generation: number, nowMs: number): ProbeTicket[] | undefined {
  let probes: ProbeTicket[] | undefined;
  for (const it of items) {
    if (it.via !== "store" || it.limit.shadowMode) continue;
    const c = it.check!;
    const probe = notes.startProbe(c.key, c.algorithm, c.capacity, algorithm(c.algorithm).limitParam(c), generation, nowMs);
    if (probe) (probes ??= []).push({ item: it, probe });
  }
  return probes;
}

export function endProbes(notes: DenyNotes, probes: ProbeTicket[]): void {
  for (const { item, probe } of probes) {
    const r = item.result;
    notes.endProbe(item.check!.key, probe, item.via === "store" && r.allowed && item.hits > 0 && r.remaining === 0);
  }
}

/**
 * Notes from the store's refusals. Only a refusal of a single hit (need 1) says every request on the
 * limit is refused until then, and only one decided against the stored level: a check after another
 * of the same key in this request was decided against the level its earlier hits would leave.
 * nowMs was read before the call, so the note ends no later than the store's own Retry-After.
 */
export function takeNotes(notes: DenyNotes | undefined, items: Item[], generation: number, nowMs: number): void {
  if (!notes) return;
  for (let j = 0; j < items.length; j++) {
    const it = items[j];
    const r = it.result;
    if (it.via !== "store" || r.allowed || it.limit.shadowMode || it.hits > 1 || r.retryAfterMs <= 0) continue;
    const c = it.check!;
    if (sameKeyBefore(items, j)) continue;
    const a = algorithm(c.algorithm);
    notes.set(c.key, {
      algorithm: c.algorithm,
      capacity: c.capacity,
      param: a.limitParam(c),
      generation,
      untilMs: nowMs + Math.min(r.retryAfterMs, notes.maxLifeMs),
      retryAtMs: nowMs + r.retryAfterMs,
      resetAtMs: a.resetsAtEnd && r.periodEndMs > 0 ? r.periodEndMs : nowMs + r.resetSeconds * 1000,
      periodEndMs: r.periodEndMs,
    });
  }
}

/** An earlier store check of the request on the same key took hits from the level this one saw. */
function sameKeyBefore(items: Item[], j: number): boolean {
  const key = items[j].check!.key;
  for (let i = 0; i < j; i++) {
    const c = items[i].check;
    if (c && c.key === key && c.hits > 0) return true;
  }
  return false;
}
