// The demo app behind Envoy (docker-compose.yml): answers every request with a small JSON echo, so that
// `curl localhost:10000/...` shows what got through. Not part of sluice.
import http from "node:http";

const port = Number(process.env.PORT ?? 8080);

const server = http.createServer((req, res) => {
  const body = JSON.stringify({ ok: true, method: req.method, path: req.url }) + "\n";
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
});

server.listen(port, () => console.log(`demo upstream listening on ${port}`));
for (const signal of ["SIGTERM", "SIGINT"]) process.once(signal, () => server.close(() => process.exit(0)));
