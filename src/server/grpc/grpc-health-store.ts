// gRPC health that follows the store, where asked for (the reference's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, as
// its gRPC health does): NOT_SERVING while a store node is not up, SERVING again once every node is. Not the
// default: instances usually share their store, so a store outage would mark every one unhealthy, and Envoy
// would then either route to all of them anyway (panic) or fail every call, replacing each limit's failure_mode
// by its one failure_mode_deny (docs/operating.md, "Envoy's health checks").
import type { Logger } from "pino";
import type { StoreStatus } from "../../store/store.js";

/** How often the store's last known state (in memory, no I/O) is looked at: well inside a health check's interval. */
const LOOK_EVERY_MS = 100;

/** Sets the gRPC health from the store's state now and on every change; returns the stop. */
export function servingFollowsStore(status: () => StoreStatus, setServing: (serving: boolean) => void, logger: Logger, everyMs = LOOK_EVERY_MS): () => void {
  let last: boolean | undefined;
  const look = () => {
    const notUp = status()
      .nodes.filter((n) => n.state !== "up")
      .map((n) => `${n.id} ${n.state}`);
    const up = notUp.length === 0;
    if (up === last) return;
    if (up && last === false) logger.info("gRPC health SERVING: every store node is up again");
    if (!up) logger.warn({ nodes: notUp }, "gRPC health NOT_SERVING: a store node is not up (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION)");
    last = up;
    setServing(up);
  };
  look();
  const timer = setInterval(look, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
