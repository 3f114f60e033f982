// Reads envoyproxy/ratelimit's variables from an environment: typed values with the reference's
// defaults, refusals that name the variable, and notes on variables accepted but not used.
import { REFERENCE_DEFAULTS } from "./defaults.js";
import { goDurationMs, goFloat, goInt } from "../../core/go-values.js";
import { YES_NO_TEXT, yesNo } from "../../core/settings-table.js";
import { UsageError } from "../../core/usage-error.js";

/** A reference variable sluice read and does not use, with why (logged at start, docs/configuration.md table). */
export interface ReferenceNote {
  variable: string;
  reason: string;
  /** The value differs from the reference's default (logged as a warning then). */
  differs: boolean;
}

/** Is one of sluice's own settings given? flag name (without --) and/or its SLUICE_* variable. */
export type OwnSetting = (flag: string | undefined, envName: string | undefined) => boolean;

/**
 * Names a platform or another program may set for its own reasons (Cloud Run and Heroku set PORT): alone
 * they keep their meaning below and do not make the environment the reference's.
 */
const GENERIC = new Set(["HOST", "PORT", "LOG_LEVEL", "LOG_FORMAT"]);

/** Values are never printed for these: they hold passwords. */
const SECRET = new Set(["REDIS_AUTH", "REDIS_SENTINEL_AUTH", "REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_SENTINEL_AUTH"]);

export class ReferenceReader {
  /** SLUICE_* values that the reference variables stand for (used where the environment has none). */
  readonly sluiceEnv: Record<string, string> = {};
  readonly notes: ReferenceNote[] = [];
  /** Every variable looked at (tests check that none of the reference's list is overlooked). */
  readonly read = new Set<string>();

  constructor(
    private readonly env: NodeJS.ProcessEnv,
    readonly own: OwnSetting,
  ) {}

  /** The variable's value; an empty value counts as unset (the reference would refuse most of them). */
  raw(name: string): string | undefined {
    this.read.add(name);
    const v = this.env[name];
    return v === undefined || v === "" ? undefined : v;
  }

  /** Set at all, even to the empty string. */
  isSet(name: string): boolean {
    this.read.add(name);
    return this.env[name] !== undefined;
  }

  has(name: string): boolean {
    return this.raw(name) !== undefined;
  }

  /**
   * The environment names one of the reference's own variables (not only generic ones): then sluice takes
   * the reference's port layout, failure semantics and keys as its defaults (docs/configuration.md "Reference environment variables").
   */
  referenceEnvironment(): boolean {
    for (const name of Object.keys(REFERENCE_DEFAULTS)) {
      if (!GENERIC.has(name) && this.env[name] !== undefined && this.env[name] !== "") return true;
    }
    return false;
  }

  /** Any of these is set. */
  any(...names: string[]): boolean {
    return names.some((n) => this.has(n));
  }

  str(name: string, fallback: string): string {
    return this.raw(name) ?? fallback;
  }

  bool(name: string, fallback: boolean): boolean {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    // The one yes/no reader of every setting: Go's spellings (the reference's) and sluice's own.
    const v = yesNo(raw);
    if (v === undefined) throw this.error(name, `must be ${YES_NO_TEXT}`);
    return v;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const v = goInt(raw);
    if (v === undefined || v < min || v > max) throw this.error(name, `must be an integer from ${min} to ${max}`);
    return v;
  }

  float(name: string, fallback: number): number {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const v = goFloat(raw);
    if (v === undefined) throw this.error(name, "must be a number");
    return v;
  }

  /** A Go duration ("10s", "1h30m") in milliseconds. */
  durationMs(name: string, fallbackMs: number): number {
    const raw = this.raw(name);
    if (raw === undefined) return fallbackMs;
    const v = goDurationMs(raw);
    if (v === undefined) throw this.error(name, "must be a duration like 300ms, 10s, 1h30m");
    return v;
  }

  /** Sets a SLUICE_* value this variable stands for. */
  map(sluiceName: string, value: string): void {
    this.sluiceEnv[sluiceName] = value;
  }

  /** Records that a set variable is accepted and not used; a yes/no variable must still be a yes or a no, as the reference requires. */
  ignore(name: string, reason: string): void {
    const raw = this.raw(name);
    if (raw === undefined) return;
    const d = REFERENCE_DEFAULTS[name];
    if (d === "true" || d === "false") this.bool(name, d === "true");
    this.notes.push({ variable: name, reason, differs: raw !== REFERENCE_DEFAULTS[name] });
  }

  /** A start refusal naming the variable, its value (never a secret's) and why. */
  error(name: string, why: string): UsageError {
    const raw = this.env[name] ?? "";
    const shown = SECRET.has(name) ? "" : `=${raw.length > 200 ? raw.slice(0, 200) + "…" : raw}`;
    return new UsageError(`${name}${shown} (envoyproxy/ratelimit setting): ${why}`, name);
  }
}
