// The minimal upstream of the envoy scenario: HTTP/1.1, 200 with a two-byte body, keep-alive.
import http from "node:http";

const body = Buffer.from("ok");
const server = http.createServer((req, res) => {
  req.resume();
  res.writeHead(200, { "content-type": "text/plain", "content-length": body.length });
  res.end(body);
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ msg: "listening", port: server.address().port })));
const stop = () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
