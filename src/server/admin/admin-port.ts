// sluice's own admin port: its routes behind the guard of admin-access.ts (Host names, the token beyond
// loopback). Bound beyond loopback without a token, it says at start that its routes answer anyone.
import type { Logger } from "pino";
import { ENV } from "../../core/settings-table.js";
import { adminGuard, isLoopback, type AdminAccess } from "./admin-access.js";
import { startAdminServer, type AdminHandler, type RunningAdminServer } from "./admin.js";
import type { ListenSetting } from "./listen-error.js";

interface AdminPortOptions {
  adminHost: string;
  adminPort: number;
  adminAccess: AdminAccess;
  listenSettings: { admin: ListenSetting };
  routes: Record<string, AdminHandler>;
  logger: Logger;
}

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "::1", "[::1]"]);

export function loopbackAddress(host: string): boolean {
  return LOOPBACK_NAMES.has(host) || isLoopback(host);
}

/** Throws ListenError when the port cannot be had. */
export async function startAdminPort(o: AdminPortOptions): Promise<RunningAdminServer> {
  const server = await startAdminServer({
    host: o.adminHost,
    port: o.adminPort,
    routes: o.routes,
    logger: o.logger,
    guard: adminGuard(o.adminAccess),
    setting: o.listenSettings.admin,
  });
  if (!loopbackAddress(o.adminHost) && !o.adminAccess.token) {
    o.logger.warn(
      { adminHost: o.adminHost, adminPort: server.port, routes: Object.keys(o.routes).filter((r) => r !== "/healthz" && r !== "/readyz") },
      `the admin port listens beyond loopback without ${ENV.ADMIN_TOKEN_FILE}: these routes (who is refused, the rules) answer anyone who can reach it`,
    );
  }
  return server;
}
