// A replay client in the manner of redis-benchmark: one command sent `calls` times over `connections`
// connections, one call in flight on each, "__rand_int__" in an argument replaced by a random id below `keys`
// (12 digits, as redis-benchmark writes it). It exists because sluice's script calls carry their numbers as
// one binary argument (lua/args.lua), and redis-benchmark takes its arguments from argv, where a NUL byte
// cannot be. Each call's bytes are encoded before the run, and a reply is only framed (not decoded), so
// the client's own cost per call stays small next to Redis's.
import net from "node:net";

const RAND = "__rand_int__";

/** The RESP encoding of one call of `args` (strings or Buffers), with a random id where RAND is. */
function encodeCall(args, keys) {
  const id = String(Math.floor(Math.random() * keys)).padStart(12, "0");
  const parts = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a).replaceAll(RAND, id));
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n"));
  }
  return Buffer.concat(parts);
}

/**
 * The end of the first whole reply in buf from `at`, or -1 when it is not all there; errors counted in
 * state.errors (a call that errors costs little and would read as a cheap call).
 */
function replyEnd(buf, at, state) {
  const line = buf.indexOf("\r\n", at);
  if (line < 0) return -1;
  const type = buf[at];
  if (type === 0x2b || type === 0x3a) return line + 2; // + :
  if (type === 0x2d) {
    state.errors++;
    state.lastError ??= buf.toString("utf8", at + 1, line);
    return line + 2;
  }
  const n = Number(buf.toString("latin1", at + 1, line));
  if (type === 0x24) {
    if (n < 0) return line + 2;
    const end = line + 2 + n + 2;
    return end <= buf.length ? end : -1;
  }
  if (type === 0x2a) {
    let p = line + 2;
    for (let i = 0; i < n; i++) {
      p = replyEnd(buf, p, state);
      if (p < 0) return -1;
    }
    return p;
  }
  throw new Error(`unexpected reply byte ${type} from Redis`);
}

/** Sends the calls; resolves with { calls, errors, lastError, seconds } once every reply is in. */
export async function respLoad({ port, host = "127.0.0.1", calls, connections = 16, keys }, args) {
  const perConnection = Array.from({ length: connections }, (_, i) => Math.floor(calls / connections) + (i < calls % connections ? 1 : 0));
  const state = { errors: 0, lastError: undefined };
  const started = process.hrtime.bigint();
  await Promise.all(
    perConnection.map(
      (n) =>
        new Promise((resolve, reject) => {
          if (n === 0) return resolve();
          const encoded = Array.from({ length: n }, () => encodeCall(args, keys));
          const socket = net.connect(port, host);
          socket.setNoDelay(true);
          let sent = 0;
          let answered = 0;
          let pending = Buffer.alloc(0);
          socket.on("connect", () => socket.write(encoded[sent++]));
          socket.on("data", (chunk) => {
            pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
            let at = 0;
            for (let end = replyEnd(pending, at, state); end >= 0; end = at < pending.length ? replyEnd(pending, at, state) : -1) {
              at = end;
              answered++;
              if (sent < n) socket.write(encoded[sent++]);
            }
            pending = pending.subarray(at);
            if (answered === n) socket.end(resolve);
          });
          socket.on("error", reject);
        }),
    ),
  );
  return { calls, errors: state.errors, lastError: state.lastError, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}
