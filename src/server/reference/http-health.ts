// GET /healthcheck as the reference answers it (its HTTP port): 200 with the body "OK" when healthy, 500
// with an empty body when not. Unhealthy until the store was reached once (the reference waits for
// Redis before it serves), from the start of shutdown, and, when asked for, while no domain is loaded
// (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED) or while a store node is not connected
// (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION).
import type { StoreStatus } from "../../store/store.js";
import type { AdminHandler } from "../admin/admin.js";

interface HealthSource {
  /** Serving calls (false before the gRPC server serves and from the start of shutdown). */
  serving(): boolean;
  /** Domains in the rules in force. */
  domains(): number;
  store(): StoreStatus;
}

interface HealthRules {
  atLeastOneDomain: boolean;
  storeConnected: boolean;
}

export class ReferenceHealth {
  private storeReached = false;

  constructor(
    private readonly src: HealthSource,
    private readonly rules: HealthRules,
  ) {}

  /** Looks at the store now (called once it started, and by every check). */
  observe(): boolean {
    const up = this.src.store().nodes.every((n) => n.state === "up");
    if (up) this.storeReached = true;
    return up;
  }

  healthy(): boolean {
    const up = this.observe();
    if (!this.src.serving() || !this.storeReached) return false;
    if (this.rules.storeConnected && !up) return false;
    if (this.rules.atLeastOneDomain && this.src.domains() === 0) return false;
    return true;
  }

  route(): AdminHandler {
    return () => (this.healthy() ? { status: 200, body: "OK" } : { status: 500, body: "" });
  }
}
