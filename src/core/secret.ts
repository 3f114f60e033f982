// A value that must never reach a log line, a metrics label or an admin page: every way of
// printing it prints "[redacted]"; only reveal() gives the value, at the one place that needs it.
import { inspect } from "node:util";

const REDACTED = "[redacted]";

export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}
