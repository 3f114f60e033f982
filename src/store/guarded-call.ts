// One script call to one store node, as both Redis stores make it: refused at once while the node's
// circuit is open, bounded by the node's ReplyWatch (the caller watches the call it starts), timed for
// metrics; connection trouble and timeouts feed the breaker (a Redis error reply is about the call,
// not the node's health).
import { ReplyError } from "ioredis";
import type { Logger } from "pino";
import type { BreakerState, CircuitBreaker } from "./breaker.js";
import { failureWords, failureSentence } from "./failure-words.js";
import { StoreUnavailableError } from "./store.js";

export type StoreCallObserver = (node: string, seconds: number, ok: boolean) => void;

export async function guardedCall(
  node: string,
  breaker: CircuitBreaker,
  onCall: StoreCallObserver | undefined,
  what: string,
  watchedCall: () => Promise<unknown>,
): Promise<unknown> {
  if (breaker.isOpen) throw circuitOpen(node);
  const started = performance.now();
  try {
    const reply = await watchedCall();
    breaker.success();
    onCall?.(node, (performance.now() - started) / 1000, true);
    return reply;
  } catch (err) {
    onCall?.(node, (performance.now() - started) / 1000, false);
    const words = failureWords(err);
    if (!(err instanceof ReplyError)) breaker.failure(words.reason, started);
    throw new StoreUnavailableError(failureSentence(node, what, words), err, words);
  }
}

const OPEN = { reason: "circuit open: calls fail at once until a probe answers", detail: "", unreachable: true };

/** A call refused because the node's circuit is open. */
export function circuitOpen(node: string): StoreUnavailableError {
  return new StoreUnavailableError(failureSentence(node, "call", OPEN), undefined, OPEN);
}

/** The breaker's state changes as log lines, once each. */
export function logBreakerChanges(logger: Logger, node: string): (state: BreakerState, reason: string) => void {
  return (state, reason) => {
    if (state === "open") logger.warn({ store: node, reason }, "rate-limit store circuit open");
    else logger.info({ store: node, reason }, "rate-limit store circuit closed");
  };
}
