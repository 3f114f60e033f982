// Two listeners on one port would fail at bind time with EADDRINUSE; say at start which settings clash.
import { UsageError } from "../../core/usage-error.js";
import type { HttpListener } from "../../server/reference/http-listeners.js";
import type { ListenSetting } from "../../server/admin/listen-error.js";

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

interface ListenerSettings {
  host: string;
  port: number;
  adminHost: string;
  adminPort: number;
  referenceHttp?: HttpListener;
  referenceDebug?: HttpListener;
  prometheus?: HttpListener;
  listenSettings: { grpc: ListenSetting; admin: ListenSetting };
}

/** Listeners the reference's variables open must not take a port another listener has (a UsageError names both). */
export function checkListeners(s: ListenerSettings): void {
  const { grpc, admin } = s.listenSettings;
  const clash = listenerClash([
    { name: `${grpc.what} (${grpc.port})`, host: s.host, port: s.port, reference: false },
    { name: `${admin.what} (${admin.port})`, host: s.adminHost, port: s.adminPort, reference: false },
    ...(s.referenceHttp ? [{ name: "PORT (the reference's HTTP port: /healthcheck, /json)", ...s.referenceHttp, reference: true }] : []),
    ...(s.referenceDebug ? [{ name: "DEBUG_PORT (the reference's debug port: /rlconfig, /stats)", ...s.referenceDebug, reference: true }] : []),
    ...(s.prometheus ? [{ name: "PROMETHEUS_ADDR", host: s.prometheus.host, port: s.prometheus.port, reference: true }] : []),
  ]);
  if (clash) throw new UsageError(clash);
}
