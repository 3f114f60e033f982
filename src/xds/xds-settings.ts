// How sluice reaches its control plane (--config-xds, or the reference's CONFIG_GRPC_XDS_* variables).
import { ENV, readBool, readText, SETTINGS } from "../core/settings-table.js";
import fs from "node:fs";
import { createRequire } from "node:module";
import type { ChannelCredentials } from "@grpc/grpc-js";
import type { BackoffSettings } from "./backoff.js";
import { parseHostPort } from "../core/host-port.js";
import { UsageError } from "../core/usage-error.js";

export interface XdsSettings {
  /** host:port of the ADS server. */
  target: string;
  /** TLS to the control plane; absent = plaintext. No CA file = the system's CAs. */
  tls?: { caFile?: string; certFile?: string; keyFile?: string; serverName?: string };
  nodeId: string;
  nodeMetadata: Record<string, string>;
  /** gRPC metadata sent with the stream. */
  headers: Record<string, string>;
  connectTimeoutMs: number;
  connectRetryMs: number;
  backoff: BackoffSettings;
  maxMessageBytes: number;
}

/** Channel credentials from the files as they are now (read at every connect: rotated certificates are picked up). */
export function xdsCredentials(x: XdsSettings): ChannelCredentials {
  // grpc-js is required here, not imported above: a process without xDS never loads it (idle memory).
  const grpc = createRequire(import.meta.url)("@grpc/grpc-js") as typeof import("@grpc/grpc-js");
  if (!x.tls) return grpc.credentials.createInsecure();
  const read = (f: string | undefined) => (f ? fs.readFileSync(f) : null);
  return grpc.credentials.createSsl(read(x.tls.caFile), read(x.tls.keyFile), read(x.tls.certFile));
}

/** What only the reference's variables tune (CONFIG_GRPC_XDS_*, XDS_CLIENT_*); sluice's defaults otherwise. */
export type XdsTuning = Pick<XdsSettings, "nodeMetadata" | "headers" | "connectRetryMs" | "backoff" | "maxMessageBytes">;

export const DEFAULT_XDS_TUNING: XdsTuning = {
  nodeMetadata: {},
  headers: {},
  connectRetryMs: 3000,
  backoff: { initialMs: 1000, maxMs: 30_000, factor: 2, jitter: true },
  // gRPC's default receive limit, as the reference's when XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES is unset.
  maxMessageBytes: 4 << 20,
};

/** A connection attempt that has not succeeded by then is retried. */
const CONNECT_TIMEOUT_MS = 10_000;

/** --config-xds / SLUICE_CONFIG_XDS and the node-id and TLS variables (the reference's are mapped onto them). */
export function xdsSettings(flag: string | undefined, env: NodeJS.ProcessEnv, tuning: XdsTuning | undefined): XdsSettings | undefined {
  const target = (flag ?? env[ENV.CONFIG_XDS] ?? "").trim();
  const tlsVars = [ENV.XDS_TLS_CA, ENV.XDS_TLS_CERT, ENV.XDS_TLS_KEY, ENV.XDS_TLS_SERVER_NAME].filter((v) => env[v]);
  const tlsOn = readBool(env, SETTINGS.XDS_TLS);
  if (target === "") {
    const given = [ENV.XDS_NODE_ID, ...(tlsOn ? [ENV.XDS_TLS] : []), ...tlsVars].filter((v) => env[v]);
    if (given.length > 0) throw new UsageError(`${given.join(" and ")} ${given.length === 1 ? "needs" : "need"} --config-xds (or SLUICE_CONFIG_XDS)`, given[0]);
    return undefined;
  }
  // A gRPC target: host:port, [v6]:port, or a resolver URI such as dns:///host:port.
  if (!parseHostPort(target) && !/^[a-z][a-z0-9+.-]*:\/\/\/?\S+$/.test(target)) {
    throw new UsageError(`--config-xds takes the control plane's host:port (or a gRPC target like dns:///host:port), got '${target}'`, "--config-xds");
  }
  if (!tlsOn && tlsVars.length > 0) throw new UsageError(`${tlsVars.join(" and ")} ${tlsVars.length === 1 ? "needs" : "need"} SLUICE_XDS_TLS=true`, tlsVars[0]);
  const certFile = env[ENV.XDS_TLS_CERT] || undefined;
  const keyFile = env[ENV.XDS_TLS_KEY] || undefined;
  if (!certFile !== !keyFile)
    throw new UsageError("SLUICE_XDS_TLS_CERT and SLUICE_XDS_TLS_KEY go together (the client certificate for the control plane)", ENV.XDS_TLS_CERT);
  const tls = tlsOn ? { caFile: env[ENV.XDS_TLS_CA] || undefined, certFile, keyFile, serverName: env[ENV.XDS_TLS_SERVER_NAME] || undefined } : undefined;
  const out: XdsSettings = {
    target,
    ...(tls ? { tls } : {}),
    nodeId: readText(env, SETTINGS.XDS_NODE_ID),
    ...(tuning ?? DEFAULT_XDS_TUNING),
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
  };
  // The files must be readable now: a typo stops the start instead of a retry loop.
  try {
    xdsCredentials(out);
  } catch (err) {
    throw new UsageError(`TLS to the xDS server: ${(err as Error).message}`, ENV.XDS_TLS);
  }
  return out;
}
