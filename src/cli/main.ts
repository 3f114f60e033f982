// The `sluice` command, loaded by bin.ts: serve | check | explain | top | help | --version, each command in a
// file of its own; usage errors exit 2, and the exit waits for stdout and stderr to take what was written.
import { COMMAND_FLAGS, EXPLAIN_FLAGS, parseFlags, SERVE_FLAGS, serveSettings, TOP_FLAGS, UsageError } from "../settings/settings.js";
import { commandHelp, topHelp, USAGE, version } from "../settings/usage.js";
import { check } from "./check.js";
import { explainCommand } from "./explain.js";
import { serve } from "./serve.js";
import { topCommand } from "./top.js";

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === "serve") {
      if (parseFlags(SERVE_FLAGS, rest).values.help) return help(commandHelp("serve"));
      return await serve(serveSettings(rest, process.env, process.stdout.isTTY === true));
    }
    if (command === "check") return check(rest);
    if (command === "explain") {
      if (parseFlags(EXPLAIN_FLAGS, rest).values.help) return help(commandHelp("explain"));
      return explainCommand(rest, process.env, process.stdout, process.stderr);
    }
    if (command === "top") {
      if (parseFlags(TOP_FLAGS, rest).values.help) return help(commandHelp("top"));
      return await topCommand(rest, process.stdout, process.stderr);
    }
    if (command === "help" || command === "--help" || command === "-h") {
      const topic = rest[0];
      if (topic === undefined) return help(topHelp());
      if (rest.length === 1 && topic in COMMAND_FLAGS) return help(commandHelp(topic));
      throw new UsageError(`no help on '${rest.join(" ")}'`);
    }
    if ((command === "--version" || command === "version") && rest.length === 0) return help(version() + "\n");
    throw new UsageError(command ? `unknown command '${command}'` : "no command given");
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`sluice: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    throw err;
  }
}

function help(text: string): number {
  process.stdout.write(text);
  return 0;
}

/** The longest an exit waits for stdout and stderr to take what was written (a reader that never reads). */
const FLUSH_MS = 10_000;

/**
 * Exits once stdout and stderr took everything written: a pipe that is full queues the rest, which process.exit
 * would drop (`sluice check` of a file with 130,000 errors printed 1,500 of them).
 */
function exitAfterFlush(code: number): void {
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write("", done);
  process.stderr.write("", done);
  setTimeout(() => process.exit(code), FLUSH_MS).unref();
}

main(process.argv.slice(2)).then(exitAfterFlush, (err) => {
  process.stderr.write(`sluice: ${(err as Error).stack ?? err}\n`);
  exitAfterFlush(1);
});
