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
await import("./main.js");
