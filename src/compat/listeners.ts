// Two listeners on one port would fail at bind time with EADDRINUSE; say at start which settings clash.

interface NamedListener {
  /** How an operator sets it, e.g. "PORT (the reference's HTTP port)". */
  name: string;
  host: string;
  port: number;
  /** Opened because of a reference variable: only clashes involving one are checked here. */
  reference: boolean;
}

const WILDCARD = new Set(["", "0.0.0.0", "::", "[::]"]);

/** The first pair that would bind the same port on overlapping addresses, as a message; undefined if none. */
export function listenerClash(list: NamedListener[]): string | undefined {
  for (let i = 0; i < list.length; i++) {
    for (let j = i + 1; j < list.length; j++) {
      const a = list[i];
      const b = list[j];
      if (!a.reference && !b.reference) continue;
      if (a.port === 0 || a.port !== b.port) continue;
      if (a.host !== b.host && !WILDCARD.has(a.host) && !WILDCARD.has(b.host)) continue;
      return `${a.name} and ${b.name} both use port ${a.port}: give one of them another port`;
    }
  }
  return undefined;
}
