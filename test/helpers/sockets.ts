// Which process holds which TCP socket, from /proc (Linux): shows where the kernel (or a cluster
// primary) put a connection without asking the server anything.
import fs from "node:fs";

const LISTEN = "0A";

interface TcpSocket {
  localPort: number;
  remotePort: number;
  /** The kernel's state code, hex: 01 ESTABLISHED, 0A LISTEN. */
  state: string;
  inode: number;
}

/** Every IPv4 and IPv6 TCP socket of this network namespace. */
function tcpSockets(): TcpSocket[] {
  const out: TcpSocket[] = [];
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch {
      continue; // no IPv6
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const port = (addr: string) => parseInt(addr.slice(addr.lastIndexOf(":") + 1), 16);
      out.push({ localPort: port(f[1]), remotePort: port(f[2]), state: f[3], inode: Number(f[9]) });
    }
  }
  return out;
}

/** inode -> pid, for the sockets these processes hold open. */
function socketHolders(pids: number[]): Map<number, number> {
  const holders = new Map<number, number>();
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // exited
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) holders.set(Number(m[1]), pid);
      } catch {
        /* closed meanwhile */
      }
    }
  }
  return holders;
}

/** Which of these processes hold a listening socket on the port (sorted, each once). */
export function listeningPids(port: number, pids: number[]): number[] {
  const holders = socketHolders(pids);
  const found = tcpSockets()
    .filter((s) => s.state === LISTEN && s.localPort === port && holders.has(s.inode))
    .map((s) => holders.get(s.inode)!);
  return [...new Set(found)].sort((a, b) => a - b);
}

/** The process (of these) holding the server's end of the connection a client made from clientPort to serverPort. */
export function serverEndHolder(serverPort: number, clientPort: number, pids: number[]): number | undefined {
  const holders = socketHolders(pids);
  const ends = tcpSockets().filter((s) => s.state !== LISTEN && s.localPort === serverPort && s.remotePort === clientPort);
  for (const s of ends) if (holders.has(s.inode)) return holders.get(s.inode);
  return undefined;
}
