// The reference's listeners and gRPC server settings: GRPC_*, HOST/PORT, DEBUG_*, GRPC TLS.
import { ENV } from "../../core/settings-table.js";
import type { ReferenceReader } from "./reader.js";
import { REFERENCE_DEFAULTS } from "./defaults.js";

import type { HttpListener } from "../../server/reference/http-listeners.js";
import type { ListenSetting } from "../../server/admin/listen-error.js";

export type { HttpListener };

interface ServerPart {
  referenceHttp?: HttpListener;
  referenceDebug?: HttpListener;
  listenSettings: { grpc: ListenSetting; admin: ListenSetting };
}

/**
 * sluice's admin port under the reference's environment: its HTTP port has 8080 (on every address), its gRPC
 * port 8081; the admin port takes the next one, on loopback, so that /top, /ui, /explain and /rules stay private.
 */
const ADMIN_PORT_UNDER_REFERENCE = "8082";

/** The reference's HTTP and debug ports at their defaults: what probes and scrapers written for it ask. */
const REFERENCE_HTTP_PORT = Number(REFERENCE_DEFAULTS.PORT);
const REFERENCE_DEBUG_PORT = Number(REFERENCE_DEFAULTS.DEBUG_PORT);

const DAY_MS = 24 * 3_600_000;
const HOUR_MS = 3_600_000;

/** `layout`: the environment is the reference's (reader.referenceEnvironment): its ports open as it opens them. */
export function readServer(r: ReferenceReader, layout: boolean): ServerPart {
  const out: ServerPart = { listenSettings: listenSettings(r, layout) };
  if (r.has("GRPC_UDS")) {
    throw r.error("GRPC_UDS", "sluice serves gRPC on TCP only: unset GRPC_UDS and give GRPC_PORT (and GRPC_HOST)");
  }
  if (r.has("GRPC_HOST") && !r.own("host", ENV.HOST)) r.map(ENV.HOST, r.str("GRPC_HOST", ""));
  const grpcPort = r.int("GRPC_PORT", Number(REFERENCE_DEFAULTS.GRPC_PORT), 0, 65535);
  if (r.has("GRPC_PORT") && !r.own("port", ENV.PORT)) r.map(ENV.PORT, String(grpcPort));

  // The reference always opens these; sluice opens them under the reference's environment, or when their
  // own variables are used (docs/configuration.md).
  if (layout && !r.own("admin-port", ENV.ADMIN_PORT)) r.map(ENV.ADMIN_PORT, ADMIN_PORT_UNDER_REFERENCE);
  if (layout || r.any("HOST", "PORT")) out.referenceHttp = { host: r.str("HOST", REFERENCE_DEFAULTS.HOST), port: r.int("PORT", REFERENCE_HTTP_PORT, 0, 65535) };
  if (layout || r.any("DEBUG_HOST", "DEBUG_PORT")) {
    out.referenceDebug = { host: r.str("DEBUG_HOST", REFERENCE_DEFAULTS.DEBUG_HOST), port: r.int("DEBUG_PORT", REFERENCE_DEBUG_PORT, 0, 65535) };
  }

  // Connection age: given either, both apply (the other at the reference's default), unless sluice's own are set.
  if (r.any("GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE")) {
    const ageMs = r.durationMs("GRPC_MAX_CONNECTION_AGE", DAY_MS);
    const graceMs = r.durationMs("GRPC_MAX_CONNECTION_AGE_GRACE", HOUR_MS);
    if (!r.own("", ENV.MAX_CONNECTION_AGE_MS)) r.map(ENV.MAX_CONNECTION_AGE_MS, String(ageMs));
    if (!r.own("", ENV.MAX_CONNECTION_AGE_GRACE_MS)) r.map(ENV.MAX_CONNECTION_AGE_GRACE_MS, String(graceMs));
  }

  readGrpcTls(r);
  return out;
}

/** How the gRPC and admin ports are moved, as said when one cannot be had: the setting that gave it, or all that could. */
function listenSettings(r: ReferenceReader, layout: boolean): ServerPart["listenSettings"] {
  const name = (flag: string, sluice: string, reference?: string): string => {
    if (r.own(flag, undefined)) return `--${flag}`;
    if (r.own(undefined, sluice)) return `${sluice} or --${flag}`;
    return reference !== undefined && (layout || r.has(reference)) ? `${reference}, --${flag} or ${sluice}` : `--${flag} or ${sluice}`;
  };
  return {
    grpc: { what: "the gRPC port", port: name("port", ENV.PORT, "GRPC_PORT"), host: name("host", ENV.HOST, "GRPC_HOST") },
    admin: { what: "sluice's admin port", port: name("admin-port", ENV.ADMIN_PORT), host: name("admin-host", ENV.ADMIN_HOST) },
  };
}

/** GRPC_SERVER_USE_TLS + cert, key and client CA -> --tls-cert, --tls-key, --tls-ca (unless sluice's own are given). */
function readGrpcTls(r: ReferenceReader): void {
  const files = ["GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT", "GRPC_CLIENT_TLS_SAN"];
  if (!r.bool("GRPC_SERVER_USE_TLS", false)) {
    for (const f of files) r.ignore(f, "used only with GRPC_SERVER_USE_TLS=true, as in the reference");
    return;
  }
  if (!r.has("GRPC_SERVER_TLS_CERT") || !r.has("GRPC_SERVER_TLS_KEY")) {
    throw r.error("GRPC_SERVER_USE_TLS", "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
  }
  if (r.has("GRPC_CLIENT_TLS_SAN")) {
    throw r.error(
      "GRPC_CLIENT_TLS_SAN",
      "sluice does not check the name in client certificates: with GRPC_CLIENT_TLS_CACERT it accepts every client certificate that CA signed. Use a CA that signs only your Envoys' certificates and unset GRPC_CLIENT_TLS_SAN",
    );
  }
  if (r.own("tls-cert", ENV.TLS_CERT) || r.own("tls-key", ENV.TLS_KEY) || r.own("tls-ca", ENV.TLS_CA)) {
    for (const f of files) r.ignore(f, "sluice's own --tls-cert/--tls-key/--tls-ca (or SLUICE_TLS_CERT, _KEY, _CA) are given and win");
    return;
  }
  r.map(ENV.TLS_CERT, r.str("GRPC_SERVER_TLS_CERT", ""));
  r.map(ENV.TLS_KEY, r.str("GRPC_SERVER_TLS_KEY", ""));
  if (r.has("GRPC_CLIENT_TLS_CACERT")) r.map(ENV.TLS_CA, r.str("GRPC_CLIENT_TLS_CACERT", ""));
}
