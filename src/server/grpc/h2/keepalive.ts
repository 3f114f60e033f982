// Keepalive for server sessions: a connection idle for intervalMs (no frame either way, node's session
// timeout) gets a PING; one not acknowledged within timeoutMs is destroyed (a dead peer or a half-open
// TCP connection stops holding its streams and memory). Client PINGs are answered by node itself.
import type http2 from "node:http2";

const PINGING = Symbol("sluice.keepalivePing");
const KEEPALIVE = Symbol("sluice.keepalive");

interface Keepalive {
  intervalMs: number;
  timeoutMs: number;
}

type Session = http2.ServerHttp2Session & { [PINGING]?: NodeJS.Timeout; [KEEPALIVE]?: Keepalive };

export function keepSessionAlive(session: http2.ServerHttp2Session, k: Keepalive): void {
  const s = session as Session;
  s[KEEPALIVE] = k;
  // Our own listener: setTimeout(ms, cb) would take cb once, and the timer re-arms after every ping.
  s.on("timeout", onIdle);
  s.setTimeout(k.intervalMs);
  s.once("close", stopPinging);
}

function onIdle(this: Session): void {
  const k = this[KEEPALIVE];
  if (!k || this.destroyed || this.closed || this[PINGING]) return;
  const timer = setTimeout(destroyUnanswered, k.timeoutMs, this);
  timer.unref();
  this[PINGING] = timer;
  let sent = false;
  try {
    sent = this.ping((err) => {
      clearTimeout(timer);
      this[PINGING] = undefined;
      if (err) {
        if (!this.closed) this.destroy();
        return;
      }
      // Acknowledged: the peer is there; wait for the next idle period.
      if (!this.destroyed) this.setTimeout(k.intervalMs);
    });
  } catch {
    sent = false;
  }
  if (!sent) {
    clearTimeout(timer);
    this[PINGING] = undefined;
    this.destroy();
  }
}

function destroyUnanswered(session: Session): void {
  session[PINGING] = undefined;
  if (!session.destroyed) session.destroy();
}

function stopPinging(this: Session): void {
  const timer = this[PINGING];
  if (timer) clearTimeout(timer);
  this[PINGING] = undefined;
}
