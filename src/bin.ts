#!/usr/bin/env -S node --max-semi-space-size=16
// The `sluice` command's entry. It checks the Node version before anything else is loaded: main.js's
// imports and transports need a newer Node than some machines run (on Node 20 the gRPC transport started,
// then hung every call), so an older Node gets one line saying what is needed and how, and exit 1.
// Nothing here may need more than Node 14. The shebang's V8 flag is sluice's memory setting (docs/operating.md "Memory").
const NEEDED_MAJOR = 24;

const major = Number(process.versions.node.split(".")[0]);
if (!(major >= NEEDED_MAJOR)) {
  process.stderr.write(
    `sluice: needs Node.js ${NEEDED_MAJOR} or newer, this is ${process.version}: install Node ${NEEDED_MAJOR} (https://nodejs.org, \`nvm install ${NEEDED_MAJOR}\`), or run \`npm start\` in sluice's directory, which brings its own\n`,
  );
  process.exit(1);
}
// glibc's malloc gives each thread that contends for it an arena of its own, up to 8 per core, and keeps what
// each one freed: under load that was 12 to 19 MiB of RSS more than with 2 arenas, for the same CPU per call
// (docs/benchmarks.md "The process"). glibc reads MALLOC_ARENA_MAX only at a process's start, so `serve` starts
// itself again (same process id: execve) with it set, once, unless it is set already (the operator's choice).
// Not when started with an IPC channel (a process manager's fork): the channel would not survive the exec.
if (
  process.argv[2] === "serve" &&
  process.platform === "linux" &&
  process.env.MALLOC_ARENA_MAX === undefined &&
  typeof process.execve === "function" &&
  process.send === undefined
) {
  try {
    process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], { ...process.env, MALLOC_ARENA_MAX: "2" });
  } catch {
    // Not possible here: sluice runs with glibc's default arenas.
  }
}
// `serve` catches SIGTERM and SIGINT before anything else loads (importing cli/main.js takes a few hundred ms): a stop
// at any moment of the start ends it cleanly (cli/stop-signals.ts). Not before the exec above: a signal caught there
// would be lost with the old image.
if (process.argv[2] === "serve") (await import("./cli/stop-signals.js")).catchStopSignals();
await import("./cli/main.js");
