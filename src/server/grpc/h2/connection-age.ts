// Max connection age (the reference's GRPC_MAX_CONNECTION_AGE): a connection older than ageMs (with up to
// 10 % jitter, so connections made together do not all leave together) gets GOAWAY; its calls in flight
// finish, new calls go to a new connection, which a load balancer may place on another instance. What is
// still open graceMs later is closed.
import type http2 from "node:http2";

interface ConnectionAge {
  ageMs: number;
  graceMs: number;
}

export function limitSessionAge(session: http2.ServerHttp2Session, age: ConnectionAge): void {
  const ageTimer = setTimeout(goAway, age.ageMs * (1 - Math.random() * 0.1), session, age.graceMs);
  ageTimer.unref();
  session.once("close", () => clearTimeout(ageTimer));
}

function goAway(session: http2.ServerHttp2Session, graceMs: number): void {
  if (session.closed || session.destroyed) return;
  session.close();
  const graceTimer = setTimeout(() => {
    if (!session.destroyed) session.destroy();
  }, graceMs);
  graceTimer.unref();
  session.once("close", () => clearTimeout(graceTimer));
}
