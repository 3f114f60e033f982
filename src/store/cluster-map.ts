// A Redis Cluster node's view of the cluster (CLUSTER NODES) and the slot map merged from such views.
// CLUSTER NODES rather than SLOTS or SHARDS because it carries each master's config epoch: views asked
// of several nodes during a failover disagree for a moment, and the claim with the higher epoch is the
// newer one (Redis resolves slot ownership the same way), so a stale view never moves a slot back.

export const SLOTS = 16384;

interface ClusterNodeView {
  /** host:port clients connect to. */
  addr: string;
  /** The node's 40-character cluster id. */
  name: string;
  master: boolean;
  /** Flagged fail (or fail?) by the node that was asked. */
  failing: boolean;
  /** A replica's master (its cluster id). */
  replicaOf?: string;
  epoch: number;
  /** Slot ranges served, [from, to] inclusive (masters only). */
  slots: [number, number][];
}

/** Parses CLUSTER NODES; skips nodes without an address (handshake, noaddr) and migration entries. */
export function parseClusterNodes(text: string): ClusterNodeView[] {
  const out: ClusterNodeView[] = [];
  for (const line of text.split("\n")) {
    const f = line.trim().split(" ");
    if (f.length < 8) continue;
    const flags = f[2].split(",");
    if (flags.includes("handshake") || flags.includes("noaddr")) continue;
    const hostPort = f[1].split("@")[0];
    const colon = hostPort.lastIndexOf(":");
    const host = hostPort.slice(0, colon);
    const port = Number(hostPort.slice(colon + 1));
    if (host === "" || !(port > 0 && port < 65536)) continue;
    const slots: [number, number][] = [];
    for (const r of f.slice(8)) {
      if (r.startsWith("[")) continue; // [slot->-id] / [slot-<-id]: a migration in progress
      const [a, b] = r.split("-").map(Number);
      const to = b ?? a;
      if (Number.isInteger(a) && Number.isInteger(to) && a >= 0 && to < SLOTS && a <= to) slots.push([a, to]);
    }
    out.push({
      addr: `${host.includes(":") ? `[${host}]` : host}:${port}`,
      name: f[0],
      master: flags.includes("master"),
      failing: flags.includes("fail") || flags.includes("fail?"),
      replicaOf: f[3] !== "-" ? f[3] : undefined,
      epoch: Number(f[6]) || 0,
      slots,
    });
  }
  return out;
}

/**
 * Which node serves each slot, by address, kept from the views merged so far: a slot moves when a view
 * names another master for it with a higher config epoch than the claim held.
 */
export class SlotMap {
  private readonly owner: (string | undefined)[] = new Array(SLOTS);
  private readonly epoch = new Float64Array(SLOTS).fill(-1);
  /** Per node address: its role and master in the freshest view that named it. */
  readonly roles = new Map<string, { master: boolean; replicaOf?: string; failing: boolean }>();

  ownerOf(slot: number): string | undefined {
    return this.owner[slot];
  }

  /** Merges one view; returns the slots that changed owner, as [slot, from, to]. */
  merge(view: ClusterNodeView[]): { slot: number; from: string | undefined; to: string }[] {
    const moved: { slot: number; from: string | undefined; to: string }[] = [];
    const byName = new Map(view.map((n) => [n.name, n.addr]));
    for (const n of view) {
      this.roles.set(n.addr, { master: n.master, replicaOf: n.replicaOf ? byName.get(n.replicaOf) : undefined, failing: n.failing });
      if (!n.master) continue;
      for (const [from, to] of n.slots) {
        for (let s = from; s <= to; s++) {
          if (n.epoch < this.epoch[s] || (n.epoch === this.epoch[s] && this.owner[s] !== undefined)) continue;
          this.epoch[s] = n.epoch;
          if (this.owner[s] !== n.addr) {
            moved.push({ slot: s, from: this.owner[s], to: n.addr });
            this.owner[s] = n.addr;
          }
        }
      }
    }
    return moved;
  }

  /** A MOVED reply: the node answering for the slot says who owns it now. */
  moved(slot: number, to: string): boolean {
    if (this.owner[slot] === to) return false;
    this.owner[slot] = to;
    return true;
  }

  /** Slots per owner, and how many have none. */
  counts(): { perNode: Map<string, number>; unowned: number } {
    const perNode = new Map<string, number>();
    let unowned = 0;
    for (let s = 0; s < SLOTS; s++) {
      const o = this.owner[s];
      if (o === undefined) unowned++;
      else perNode.set(o, (perNode.get(o) ?? 0) + 1);
    }
    return { perNode, unowned };
  }
}
