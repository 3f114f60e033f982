// A free TCP port on 127.0.0.1, chosen by the OS (never a fixed one such as Redis's 6379).
import net from "node:net";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => (port === 6379 ? freePort().then(resolve, reject) : resolve(port)));
    });
  });
}
