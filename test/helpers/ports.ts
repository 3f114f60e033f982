// A free TCP port on 127.0.0.1, chosen by the OS: never one already in use, such as the machine's own Redis.
// The OS may hand the same port out again once it is closed, so a test asking for several ports in a
// row could get one twice (seen in CI: gRPC and PORT on the same number): ports already given out
// by this process are never given again.
import net from "node:net";

const givenOut = new Set<number>();

function osPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await osPort();
    if (givenOut.has(port)) continue;
    givenOut.add(port);
    return port;
  }
  throw new Error("freePort: the OS kept handing out ports this process already used");
}
