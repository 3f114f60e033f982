// A port that cannot be had, said in sluice's words: which port, why, and the flag or variable that moves it.
// One log line, no stack trace; the system's own text only as `detail`.
import type { Logger } from "pino";

/** A listener as an operator knows it. */
export interface ListenSetting {
  /** What listens there, e.g. "the gRPC port". */
  what: string;
  /** The flag or variable that moves the port, e.g. "PORT" or "--admin-port or SLUICE_ADMIN_PORT". */
  port: string;
  /** The flag or variable of its address. */
  host: string;
}

export class ListenError extends Error {
  readonly code: string | undefined;
  /** The flag or variable the message says to change. */
  readonly change: string;

  constructor(
    readonly detail: Error,
    readonly host: string,
    readonly port: number,
    readonly setting: ListenSetting,
  ) {
    const code = (detail as NodeJS.ErrnoException).code;
    const [message, change] = listenMessage(code, host, port, setting);
    super(message);
    this.name = "ListenError";
    this.code = code;
    this.change = change;
  }
}

/** The sentence, and the setting it says to change. */
function listenMessage(code: string | undefined, host: string, port: number, s: ListenSetting): [string, string] {
  const at = `cannot listen on ${host.includes(":") ? `[${host}]` : host}:${port} for ${s.what}`;
  switch (code) {
    case "EADDRINUSE":
      return [`${at}: another process already listens there; set ${s.port} to a free port (0 picks one)`, s.port];
    case "EACCES":
      return [`${at}: this user may not listen there (ports below 1024 need privileges); set ${s.port} to a port above 1023`, s.port];
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return [`${at}: the address is not one of this host's; set ${s.host} to one of its addresses (0.0.0.0 for all)`, s.host];
    default:
      return [`${at} (${code ?? "error"}); set ${s.port} or ${s.host} to another port or address`, s.port];
  }
}

/** The one log line of a port that could not be had. */
export function logListenError(logger: Logger, err: ListenError): void {
  logger.error({ host: err.host, port: err.port, setting: err.change, code: err.code, detail: err.detail.message }, err.message);
}
