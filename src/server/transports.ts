// The gRPC transports sluice can serve with, by name (SLUICE_TRANSPORT). Both pass the conformance suite
// (test/conformance/); h2 is the default since the bake-off (bench/README.md), grpc-js stays as a fallback.
import type { StartTransport } from "./transport.js";

export const TRANSPORT_NAMES = ["h2", "grpc-js"] as const;
export type TransportName = (typeof TRANSPORT_NAMES)[number];
export const DEFAULT_TRANSPORT: TransportName = "h2";

export interface TransportEntry {
  start: StartTransport;
  /** Honours TransportOptions.reusePort, so --workers can let the kernel spread connections. */
  reusePort: boolean;
}

// Each transport's module is loaded when it starts: the one not chosen (grpc-js by default) costs no memory.
const ENTRIES: Record<TransportName, TransportEntry> = {
  h2: { start: async (limiter, o) => (await import("./h2/server.js")).startH2Server(limiter, o), reusePort: true },
  "grpc-js": { start: async (limiter, o) => (await import("./grpc.js")).startGrpcServer(limiter, o), reusePort: true },
};

export function transportByName(name: TransportName): TransportEntry {
  return ENTRIES[name];
}
