// Wires refusal summaries into the calls' observer (server/grpc/grpc-contract.ts): the limiter is not touched.
import type { CallObserver } from "../server/grpc/grpc-contract.js";
import type { RefusalSummaries } from "./refusal-summaries.js";

export function withRefusals(observer: CallObserver, summaries: RefusalSummaries | undefined): CallObserver {
  if (!summaries) return observer;
  return {
    decided(req, decision, seconds) {
      observer.decided(req, decision, seconds);
      summaries.observe(req, decision);
    },
    failed: (code, seconds) => observer.failed(code, seconds),
  };
}
