// SLUICE_LOG_FORMAT=text (the reference's LOG_FORMAT=text): pino's JSON lines rewritten as one human line
// each, in logrus's text layout: time="..." level=info msg="listening" port=8081 ... Logs are rare (none
// per request at info), so parsing each line again costs nothing that matters.
import { pino } from "pino";

interface Out {
  write(text: string): unknown;
}

const LEVELS: Record<number, string> = { 10: "trace", 20: "debug", 30: "info", 40: "warning", 50: "error", 60: "fatal" };

/** A pino destination writing text lines to `out` (stdout by default, synchronously as pino's own). */
export function textLogDestination(out: Out = pino.destination({ dest: 1, sync: true })): { write(line: string): void } {
  return {
    write(line: string) {
      out.write(textLine(line) + "\n");
    },
  };
}

/** One pino JSON line as text; a line that is not JSON is passed through. */
export function textLine(jsonLine: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(jsonLine);
  } catch {
    return jsonLine.replace(/\n$/, "");
  }
  const { time, level, msg, ...fields } = entry;
  const parts = [
    `time=${quote(typeof time === "number" ? new Date(time).toISOString() : String(time ?? ""))}`,
    `level=${LEVELS[level as number] ?? String(level)}`,
    `msg=${quote(typeof msg === "string" ? msg : "")}`,
  ];
  for (const [key, value] of Object.entries(fields)) parts.push(`${key}=${field(value)}`);
  return parts.join(" ");
}

function field(value: unknown): string {
  if (typeof value === "string") return bare(value) ? value : quote(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  // pino's serialised errors: the message (the stack follows only at debug level and below in JSON).
  if (typeof value === "object" && value !== null && "message" in value && "type" in value) return quote(String((value as { message: unknown }).message));
  return quote(JSON.stringify(value));
}

/** logrus quotes every value with characters beyond these. */
function bare(s: string): boolean {
  return s !== "" && /^[A-Za-z0-9\-._/@^+]+$/.test(s);
}

function quote(s: string): string {
  return JSON.stringify(s);
}
