// What dist/main.js gets for ./server/grpc.js under serve.mjs: grpc.js as it is, except that
// startGrpcServer starts the transport named by SLUICE_BENCH_TRANSPORT (a candidate of candidates.mjs).
import { loadCandidate } from "./candidates.mjs";

export * from "../../dist/server/grpc.js";

const candidate = await loadCandidate(process.env.SLUICE_BENCH_TRANSPORT || "grpc-js");
if (candidate.unavailable) throw new Error(`transport ${candidate.name} unavailable: ${candidate.unavailable}`);

/** @type {import("../../dist/server/transport.js").StartTransport} */
export function startGrpcServer(limiter, o) {
  return candidate.start(limiter, o);
}
