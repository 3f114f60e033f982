// Bake-off candidate "h2": sluice's own lean unary gRPC server on node:http2 (src/server/h2/server.ts,
// startH2Server), once it is built. Until then `unavailable` says why and the bake-off skips it.
import fs from "node:fs";
import { fileURLToPath } from "node:url";

export const name = "h2";

const url = new URL("../../dist/server/h2/server.js", import.meta.url);
let mod;
let reason;
if (!fs.existsSync(fileURLToPath(url))) {
  reason = "dist/server/h2/server.js is missing (src/server/h2/server.ts not written or not built yet)";
} else {
  try {
    mod = await import(url.href);
    if (typeof mod.startH2Server !== "function") reason = "dist/server/h2/server.js has no startH2Server export";
  } catch (err) {
    reason = `dist/server/h2/server.js does not load: ${err.message}`;
  }
}

/** Why this candidate cannot run; undefined when it can. */
export const unavailable = reason;

/** @type {import("../../dist/server/transport.js").StartTransport} */
export const start = reason
  ? async () => {
      throw new Error(`transport h2 unavailable: ${reason}`);
    }
  : mod.startH2Server;
