// What `sluice --help`, `sluice COMMAND --help` and `sluice --version` print. Each command's flag list is
// generated from its flags (flags.ts, built from core/settings-table.ts), so help, parser and the docs'
// flag table cannot disagree.
import fs from "node:fs";
import { COMMAND_FLAGS, type FlagSpec } from "./flags.js";

/** The synopsis of every command; docs/configuration.md's CLI block is this text (test/unit/docs-configuration.test.ts). */
export const USAGE = `usage:
  sluice serve   [--config DIR | --config-xds HOST:PORT] [--redis URL[,URL...] | --redis-cluster HOST:PORT[,HOST:PORT...]
                  | --redis-sentinel MASTER@HOST:PORT[,HOST:PORT...]]
                 [--redis-per-second URL[,URL...] | --redis-per-second-cluster HOST:PORT[,HOST:PORT...]
                  | --redis-per-second-sentinel MASTER@HOST:PORT[,HOST:PORT...]]
                 [--port N] [--host ADDR] [--merge-domains] [--admin-port N] [--admin-host ADDR] [--workers N]
                 [--tls-cert FILE --tls-key FILE [--tls-ca FILE]] [--redis-password-file FILE] [--log-level LEVEL]
                 [--key-prefix PREFIX] [--tracing otlp|off] [--failure-mode MODE] [--allow-empty-rules] [--max-connections N] [--help]
  sluice check   [DIR | --config DIR] [--merge-domains] [--allow-empty-rules] [--help]
  sluice explain [--config DIR] --domain D [--descriptor k=v[,k=v...] ...] [--bucket k=v[,k=v...] ...] [--at TIME]
                 [--merge-domains] [--key-prefix PREFIX] [--allow-empty-rules] [--help]
  sluice top     [--admin HOST:PORT] [--window 1m|1h] [--rule RULE] [--clients N] [--once] [--json] [--help]
  sluice --version
  sluice --help | sluice COMMAND --help`;

const ABOUT: Record<string, string> = {
  serve: "Answers Envoy's rate-limit calls (gRPC) with the rules of a directory (reloaded when they change) or of a control plane (xDS).",
  check: "Checks a rule directory: prints ok and one line per domain, or every error as FILE:LINE: path: message (exit 1).",
  explain: "Shows what sluice would do with one request, and why, from the rule files alone (no store).",
  top: "Shows who a running sluice refuses (its admin port's /top), refreshed every second: rules by refusals, distinct refused clients, the most refused ones.",
};

/** `sluice --help`. */
export function topHelp(): string {
  const commands = Object.keys(COMMAND_FLAGS).map((c) => `  ${c.padEnd(8)} ${ABOUT[c]}`);
  return `${USAGE}\n\ncommands:\n${commands.join("\n")}\n\n\`sluice COMMAND --help\` lists a command's flags and their environment variables.\n`;
}

/** `sluice COMMAND --help`: its synopsis, then per flag its name and variable, and a line of help under them. */
export function commandHelp(command: string): string {
  const flags = COMMAND_FLAGS[command];
  const synopsis = USAGE.split("\n")
    .filter((_, i, lines) => ownLine(lines, i, command))
    .join("\n");
  const entries = Object.entries(flags).map(([name, f]) => `  ${flagText(name, f)}${f.env ? `  (${f.env})` : ""}\n      ${describe(f)}`);
  const more = command === "serve" ? "\nMore settings are environment variables only: docs/configuration.md lists every one.\n" : "";
  return `usage:\n${synopsis}\n\n${ABOUT[command]}\n\nflags (in parentheses the environment variable each stands for; a flag wins over it):\n${entries.join("\n")}\n${more}`;
}

/** The lines of USAGE that belong to `command`: its own and the continuation lines after it. */
function ownLine(lines: string[], i: number, command: string): boolean {
  for (let j = i; j > 0; j--) {
    const m = /^\s+sluice (\S+)/.exec(lines[j]);
    if (m) return m[1] === command;
  }
  return false;
}

function flagText(name: string, f: FlagSpec): string {
  return `${f.short ? `-${f.short}, ` : ""}--${name}${f.arg ? ` ${f.arg}` : ""}`;
}

function describe(f: FlagSpec): string {
  const shown = f.defaultText.replace(/`/g, "");
  if (shown === "—" || shown === "none" || shown === "off") return f.help;
  return `${f.help}; ${shown.startsWith("required") ? shown : `default ${shown}`}`;
}

/** The package's version (package.json, beside dist/ and src/, two folders up from dist/settings/). */
export function version(): string {
  const pkg = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  return pkg.version;
}
