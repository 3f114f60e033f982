// What dist/main.js gets for ./server/transports.js under serve.mjs: the registry as it is, except that
// transportByName answers with the transport named by SLUICE_BENCH_TRANSPORT (a candidate of candidates.mjs).
import { loadCandidate } from "./candidates.mjs";

export * from "../../dist/server/transports.js";

const candidate = await loadCandidate(process.env.SLUICE_BENCH_TRANSPORT || "grpc-js");
if (candidate.unavailable) throw new Error(`transport ${candidate.name} unavailable: ${candidate.unavailable}`);

/** Every candidate takes TransportOptions.reusePort (bench/transports/lib/h2-server.mjs for connect). */
export function transportByName() {
  return { start: candidate.start, reusePort: true };
}
