// Node's own floor for sluice's process figures: an HTTP/1.1 server (as sluice's admin port) and an HTTP/2 server
// (as its gRPC port) in one process. The HTTP/2 server answers every stream as sluice answers an allowed call
// (headers, a RateLimitResponse OK, trailers grpc-status 0), with no decoding and no limiter: under the load of
// process-cost.mjs it is what node's http2 alone costs. With --deps, sluice's three runtime dependencies on the
// idle path (pino, yaml, prom-client) are loaded too; with --heap-growth, the heap growth sluice sets at its start
// (SLUICE_HEAP_GROWING_PERCENT, by sluice's own code and default). Logs the listening line startListening waits
// for. Used by process-cost.mjs's nodeFloor and nodeFloorUnderLoad.
// Not ESM imports: as in sluice's admin.ts, `import http from "node:http"` builds node:http's whole namespace,
// whose getters load node's bundled undici, and the floor would carry it.
const http = process.getBuiltinModule("node:http");
const http2 = process.getBuiltinModule("node:http2");

if (process.argv.includes("--deps")) await Promise.all([import("pino"), import("yaml"), import("prom-client")]);
if (process.argv.includes("--heap-growth")) {
  const [{ SETTINGS }, { setHeapGrowth }] = await Promise.all([import("../../dist/core/settings-table.js"), import("../../dist/cli/heap-growth.js")]);
  const s = SETTINGS.HEAP_GROWING_PERCENT;
  setHeapGrowth(Number(process.env[s.env] ?? s.default));
}
// A RateLimitResponse with overall_code OK (field 1, varint 1) in its gRPC frame.
const ALLOWED = Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]);
const HEADERS = { ":status": 200, "content-type": "application/grpc" };
const admin = http.createServer((_req, res) => res.end("ok"));
const grpc = http2.createServer();
grpc.on("stream", (stream) => {
  stream.on("data", () => {});
  stream.on("end", () => {
    if (stream.destroyed || stream.closed) return;
    stream.respond(HEADERS, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(ALLOWED);
  });
});
const listen = (server) => new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));
const [port, adminPort] = await Promise.all([listen(grpc), listen(admin)]);
console.log(JSON.stringify({ msg: "listening", port, adminPort }));
process.on("SIGTERM", () => process.exit(0));
