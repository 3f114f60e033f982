// The service's logger: pino's JSON lines, or text lines (text-log.ts), at the level asked for.
import { pino, type Logger } from "pino";
import { StoreUnavailableError } from "../store/store.js";
import { textLogDestination } from "./text-log.js";

/**
 * `out`: stdout unless a test gives another stream. Written synchronously, as the text format is: lines are
 * rare (none per request at info), and pino's asynchronous default can reorder or drop the last lines when
 * the process exits at once (a refused start: `invalid rule` lines, then exit 1) and buffers without bound.
 */
export function serviceLogger(level: string, format: "json" | "text", out?: { write(text: string): unknown }): Logger {
  const options = { level, base: { service: "sluice" }, serializers: { err: errorFields } };
  const stdout = out ?? pino.destination({ dest: 1, sync: true });
  if (format === "text") return pino(options, textLogDestination(stdout));
  return pino(options, stdout as pino.DestinationStream);
}

/** Fields of an error that are safe to log. */
const KEPT = ["type", "message", "stack", "code", "syscall", "address", "port"] as const;

/**
 * An error as pino shows it, without its other own fields: ioredis errors carry the command and its
 * arguments, which are store keys holding request descriptor values (never logged).
 */
export function errorFields(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  // A store failure is an expected event, said in sluice's words: the library's text (its cause) only as detail.
  if (err instanceof StoreUnavailableError) return { type: err.name, message: err.message, ...(err.detail ? { detail: err.detail } : {}) };
  const all = pino.stdSerializers.err(err) as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of KEPT) if (all[k] !== undefined) out[k] = all[k];
  return out;
}
