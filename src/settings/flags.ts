// The CLI's flags, parseArgs's fields and what `--help` shows, built from the settings table
// (core/settings-table.ts) plus the arguments of explain and top, and parsing them. What a parsed flag means
// is settings.ts's.
import { commandsOf, defaultText, SETTINGS, type Command, type Setting } from "../core/settings-table.js";
import { parseArgs } from "node:util";
import { UsageError } from "../core/usage-error.js";

/**
 * One flag of the CLI: parseArgs's fields (type, short, multiple) and what `--help` and the docs' flag
 * table show: the argument's name, the SLUICE_* variable that stands for it, the default and a line of help.
 * test/unit/docs-configuration.test.ts holds docs/configuration.md's table to these.
 */
export interface FlagSpec {
  type: "string" | "boolean";
  short?: string;
  multiple?: boolean;
  arg?: string;
  env?: string;
  /** As the docs' default column shows it (not parseArgs's `default`: sluice applies defaults after the environment). */
  defaultText: string;
  help: string;
}

const HELP_FLAG = { type: "boolean", short: "h", defaultText: "—", help: "print this help and exit" } as const;

type Table = typeof SETTINGS;
/** The keys of the table's entries whose flag command C takes. */
type FlagKey<C extends Command> = {
  [K in keyof Table]: Table[K] extends { flag: string; commands: readonly (infer X)[] }
    ? C extends X
      ? K
      : never
    : Table[K] extends { flag: string }
      ? C extends "serve"
        ? K
        : never
      : never;
}[keyof Table];
type FlagName<S> = S extends { flag: infer F extends string } ? F : never;
/** Command C's flags from the table, typed as parseArgs reads them (a flag without an argument is on/off). */
type TableFlags<C extends Command> = {
  readonly [K in FlagKey<C> as FlagName<Table[K]>]: {
    readonly type: Table[K] extends { kind: "bool" } ? "boolean" : "string";
    readonly arg?: string;
    readonly env: string;
    readonly defaultText: string;
    readonly help: string;
  };
};

/** Command C's flags, in the table's order: parseArgs's fields and what `--help` and the docs show of each. */
function tableFlags<C extends Command>(command: C): TableFlags<C> {
  const out: Record<string, FlagSpec> = {};
  for (const s of Object.values(SETTINGS) as Setting[]) {
    if (!s.flag || !commandsOf(s).includes(command)) continue;
    out[s.flag] = { type: s.kind === "bool" ? "boolean" : "string", ...(s.arg ? { arg: s.arg } : {}), env: s.env, defaultText: defaultText(s), help: s.help };
  }
  return out as TableFlags<C>;
}

export const SERVE_FLAGS = { ...tableFlags("serve"), help: HELP_FLAG } as const satisfies Record<string, FlagSpec>;

/** Flags of `sluice check [DIR]`. */
export const CHECK_FLAGS = { ...tableFlags("check"), help: HELP_FLAG } as const satisfies Record<string, FlagSpec>;

/** Flags of `sluice explain`: the table's, and the request it explains. */
export const EXPLAIN_FLAGS = {
  ...tableFlags("explain"),
  domain: { type: "string", arg: "D", defaultText: "required", help: "the request's domain" },
  descriptor: {
    type: "string",
    multiple: true,
    arg: "k=v[,k=v...]",
    defaultText: "repeatable; one --descriptor or --bucket required",
    help: "one descriptor of the request, entries in order (\\ escapes , = \\)",
  },
  bucket: {
    type: "string",
    multiple: true,
    arg: "k=v[,k=v...]",
    defaultText: "repeatable",
    help: "an RLQS bucket id, read as the descriptor of its entries sorted by key",
  },
  at: { type: "string", arg: "TIME", defaultText: "now", help: "the time quota keys are shown for (ISO 8601)" },
  help: HELP_FLAG,
} as const satisfies Record<string, FlagSpec>;

/** Flags of `sluice top` (cli/top.ts). */
export const TOP_FLAGS = {
  admin: {
    type: "string",
    arg: "HOST:PORT",
    defaultText: `where \`serve\` listens in this environment (\`${SETTINGS.ADMIN_HOST.default}:${SETTINGS.ADMIN_PORT.default}\`; \`127.0.0.1:8082\` under the reference's)`,
    help: "the admin address of the sluice to watch",
  },
  window: { type: "string", arg: "WINDOW", defaultText: "`1m`", help: "1m or 1h: refusals over the last minute or the last hour" },
  rule: { type: "string", arg: "RULE", defaultText: "the most refusing", help: "the rule whose most refused clients are shown (e.g. edge.remote_address)" },
  clients: { type: "string", arg: "N", defaultText: "`5`", help: "most refused clients shown" },
  once: { type: "boolean", defaultText: "off", help: "print one view and exit" },
  json: { type: "boolean", defaultText: "off", help: "print /top's JSON once and exit" },
  help: HELP_FLAG,
} as const satisfies Record<string, FlagSpec>;

/** Every command's flags, for usage and for the docs' flag table test. */
export const COMMAND_FLAGS: Record<string, Record<string, FlagSpec>> = {
  serve: SERVE_FLAGS,
  check: CHECK_FLAGS,
  explain: EXPLAIN_FLAGS,
  top: TOP_FLAGS,
};

/** Parses one command's flags; a flag it does not take or a missing value is a usage error. */
export function parseFlags<F extends Record<string, FlagSpec>>(flags: F, args: string[], allowPositionals = false) {
  try {
    return parseArgs({ args, options: flags, strict: true, allowPositionals });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}
