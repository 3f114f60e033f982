// `sluice serve` with another transport: dist/main.js itself, every flag and SLUICE_* variable as
// sluice's (rules, RedisStore / cluster / MemoryStore, Limiter, metrics observer, admin server,
// --workers, shutdown), except that the transport main.js starts is the candidate's. So candidates
// differ only in the transport.
//   node bench/transports/serve.mjs --transport NAME [serve] [sluice serve flags...]
// NAME: a candidate of candidates.mjs (default grpc-js, or SLUICE_BENCH_TRANSPORT). How: a module
// resolve hook gives dist/main.js transport-shim.mjs where it imports ./server/transports.js; the shim's
// transportByName gives the candidate whatever SLUICE_TRANSPORT says. --workers: the forked workers run this file again and
// inherit the choice through SLUICE_BENCH_TRANSPORT.
import { registerHooks } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { CANDIDATES, loadCandidate } from "./candidates.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MAIN = pathToFileURL(path.resolve(HERE, "../../dist/main.js")).href;
const TRANSPORTS = pathToFileURL(path.resolve(HERE, "../../dist/server/transports.js")).href;
const SHIM = pathToFileURL(path.join(HERE, "transport-shim.mjs")).href;

function fail(message) {
  process.stderr.write(`serve.mjs: ${message}\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let transport = process.env.SLUICE_BENCH_TRANSPORT || "grpc-js";
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--transport" || args[i].startsWith("--transport=")) {
    const inline = args[i].includes("=");
    transport = inline ? args[i].slice("--transport=".length) : args[i + 1];
    args.splice(i, inline ? 1 : 2);
    break;
  }
}
if (!CANDIDATES.includes(transport)) fail(`unknown transport '${transport}' (known: ${CANDIDATES.join(", ")})`);
const candidate = await loadCandidate(transport);
if (candidate.unavailable) fail(`transport ${transport} unavailable: ${candidate.unavailable}`);
process.env.SLUICE_BENCH_TRANSPORT = transport;
if (args[0] !== "serve") args.unshift("serve");
// main.js reads its command from process.argv; argv[1] stays this file so --workers forks run it again.
process.argv = [process.argv[0], process.argv[1], ...args];

let redirected = false;
registerHooks({
  resolve(specifier, context, nextResolve) {
    const r = nextResolve(specifier, context);
    if (context.parentURL === MAIN && r.url === TRANSPORTS) {
      redirected = true;
      return { ...r, url: SHIM, shortCircuit: true };
    }
    return r;
  },
});
await import(MAIN);
// Checked once main.js's imports are resolved, before its transport starts: a main.js that no longer
// picks its transport elsewhere would otherwise serve its default under another name.
if (!redirected) fail("dist/main.js does not import ./server/transports.js any more: update bench/transports/serve.mjs");
