// Node's own floor for sluice's idle figure: an HTTP/1.1 server (as sluice's admin port) and an HTTP/2 server
// (as its gRPC port) in one process, answering every request with a few bytes; with --deps, sluice's three
// runtime dependencies on the idle path (pino, yaml, prom-client) loaded too. Logs the listening line
// startListening waits for. Used by process-cost.mjs's nodeFloor.
// Not ESM imports: as in sluice's admin.ts, `import http from "node:http"` builds node:http's whole namespace,
// whose getters load node's bundled undici, and the floor would carry it.
const http = process.getBuiltinModule("node:http");
const http2 = process.getBuiltinModule("node:http2");

if (process.argv.includes("--deps")) await Promise.all([import("pino"), import("yaml"), import("prom-client")]);
const admin = http.createServer((_req, res) => res.end("ok"));
const grpc = http2.createServer();
grpc.on("stream", (stream) => {
  stream.respond({ ":status": 200, "content-type": "application/grpc" });
  stream.end("ok");
});
const listen = (server) => new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));
const [port, adminPort] = await Promise.all([listen(grpc), listen(admin)]);
console.log(JSON.stringify({ msg: "listening", port, adminPort }));
process.on("SIGTERM", () => process.exit(0));
