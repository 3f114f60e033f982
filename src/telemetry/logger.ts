// The service's logger: pino's JSON lines, or text lines (text-log.ts), at the level asked for.
import { pino, type Logger } from "pino";
import { textLogDestination } from "./text-log.js";

/** `out`: stdout unless a test gives another stream. */
export function serviceLogger(level: string, format: "json" | "text", out?: { write(text: string): unknown }): Logger {
  const options = { level, base: { service: "sluice" }, serializers: { err: errorFields } };
  if (format === "text") return pino(options, textLogDestination(out));
  return out ? pino(options, out as pino.DestinationStream) : pino(options);
}

/** Fields of an error that are safe to log. */
const KEPT = ["type", "message", "stack", "code", "syscall", "address", "port"] as const;

/**
 * An error as pino shows it, without its other own fields: ioredis errors carry the command and its
 * arguments, which are store keys holding request descriptor values (never logged).
 */
export function errorFields(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const all = pino.stdSerializers.err(err) as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of KEPT) if (all[k] !== undefined) out[k] = all[k];
  return out;
}
