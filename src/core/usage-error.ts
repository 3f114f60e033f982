// The one error of settings: a flag, SLUICE_* variable or reference variable that cannot work (exit 2).

export class UsageError extends Error {
  /** The flag (--name) or variable at fault, where one is. */
  declare readonly setting?: string;

  constructor(message: string, setting?: string) {
    super(message);
    // Not enumerable: two errors with one message stay equal (tests compare errors by message and own fields).
    if (setting !== undefined) Object.defineProperty(this, "setting", { value: setting, enumerable: false });
  }
}
