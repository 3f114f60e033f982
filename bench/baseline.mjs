// The yardstick: a no-op RateLimitService on grpc-js + proto-loader (sluice's protos and loader options, the
// same message limits), answering OK with one status per descriptor. Every stored result is measured
// against it, so it stays as it was when sluice served with grpc-js.
//   node bench/baseline.mjs [--port N] [--host ADDR] [--workers N]
import cluster from "node:cluster";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

// Read from protos/ itself, not from dist/: the bench must not depend on a build output's file layout.
const LOADER_OPTIONS = {
  keepCase: true,
  longs: Number,
  enums: Number,
  defaults: false,
  oneofs: true,
  includeDirs: [path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../protos")],
};

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    host: { type: "string", default: "127.0.0.1" },
    workers: { type: "string", default: "1" },
  },
});
const workers = Number(values.workers);

if (workers > 1 && cluster.isPrimary) {
  // Same port sharing as `sluice serve --workers`: the primary hands connections to the workers.
  let listening = 0;
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on("message", (_w, m) => {
    if (m?.msg === "listening" && ++listening === workers) console.log(JSON.stringify({ msg: "listening", port: m.port, workers }));
  });
  const stop = () => {
    for (const w of Object.values(cluster.workers)) w.process.kill("SIGTERM");
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  cluster.on("exit", () => {
    if (Object.keys(cluster.workers).length === 0) process.exit(0);
  });
} else {
  serve();
}

function serve() {
  const def = protoLoader.loadSync(["envoy/service/ratelimit/v3/rls.proto"], LOADER_OPTIONS);
  const server = new grpc.Server({
    "grpc.max_receive_message_length": 1024 * 1024,
    "grpc.max_send_message_length": 1024 * 1024,
  });
  const OK = 1;
  server.addService(def["envoy.service.ratelimit.v3.RateLimitService"], {
    ShouldRateLimit(call, callback) {
      const n = call.request.descriptors?.length ?? 0;
      const statuses = new Array(n);
      for (let i = 0; i < n; i++) statuses[i] = { code: OK };
      callback(null, { overall_code: OK, statuses });
    },
  });
  // Cluster workers asking for port 0 all get the same port from the primary.
  server.bindAsync(`${values.host}:${values.port}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      console.error(err.message);
      process.exit(1);
    }
    if (cluster.isWorker) process.send({ msg: "listening", port });
    else console.log(JSON.stringify({ msg: "listening", port }));
  });
  const stop = () => server.tryShutdown(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}
