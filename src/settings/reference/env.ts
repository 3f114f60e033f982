// envoyproxy/ratelimit's environment (its src/settings/settings.go), honoured by sluice. Each variable
// either stands for one of sluice's own settings (used where the flag and the SLUICE_* variable are
// both absent: flag > SLUICE_* > reference variable > sluice default), sets something only the
// reference has (its HTTP and debug ports, global modes, health rules), is accepted and not used (with
// a reason, logged at start), or stops the start with a message naming it. docs/configuration.md "Reference
// environment variables" has one row per variable.
import { ReferenceReader, type OwnSetting, type ReferenceNote } from "./reader.js";
import { readBehaviour } from "./behaviour.js";
import { readRedis } from "./redis.js";
import { readRuntime } from "./runtime.js";
import { readServer, type HttpListener } from "./server.js";
import { readTelemetry } from "./telemetry.js";
import type { XdsTuning } from "../../xds/xds-settings.js";
import type { ListenSetting } from "../../server/admin/listen-error.js";

export type { OwnSetting, ReferenceNote } from "./reader.js";
export type { HttpListener } from "./server.js";

/** What only the reference's variables set. With none of them set, every field has its "off" value. */
export interface ReferenceSettings {
  /**
   * The environment names one of the reference's own variables: its ports open at their defaults (sluice's
   * admin port apart, on 8082 unless --admin-port is given), failure mode `error` and its keys by default.
   */
  referenceLayout: boolean;
  /** HOST / PORT: `GET /healthcheck` and `POST /json`; absent unless HOST or PORT is set or referenceLayout. */
  referenceHttp?: HttpListener;
  /** DEBUG_HOST / DEBUG_PORT: `GET /rlconfig`, `/stats`, pprof's paths; absent unless one of them is set or referenceLayout. */
  referenceDebug?: HttpListener;
  /** How the gRPC and admin ports are moved (the flag or variable that set each), for the error when one is taken. */
  listenSettings: { grpc: ListenSetting; admin: ListenSetting };
  /** USE_PROMETHEUS: sluice's metrics at PROMETHEUS_ADDR, path PROMETHEUS_PATH. */
  prometheus?: HttpListener & { path: string };
  /** STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT (with the reference's keys): a refused request counts nowhere. */
  referenceStopIncrement: boolean;
  /** SHADOW_MODE: refused requests are answered OK (and counted). */
  globalShadowMode: boolean;
  /** QUOTA_MODE: every descriptor is in quota mode. */
  globalQuotaMode: boolean;
  /** /healthcheck fails also while no domain is loaded / while a store node is not connected. */
  healthCheck: { atLeastOneDomain: boolean; storeConnected: boolean };
  /** FORCE_START_WITHOUT_INITIAL_CONFIG: serve with no rules while the rule directory does not load. */
  forceStartWithoutRules: boolean;
  /** EXTRA_TAGS: constant labels on every metric. */
  metricLabels: Record<string, string>;
  /** The rule directory came from RUNTIME_*: files the reference would load and sluice does not are reported at start. */
  runtimeLayout?: { dir: string; ignoreDotFiles: boolean };
  /** CONFIG_TYPE=GRPC_XDS_SOTW (or --config-xds): the reference's xDS client settings. */
  xdsTuning?: XdsTuning;
  /** Variables accepted and not used, with why. */
  referenceNotes: ReferenceNote[];
}

interface ReferenceEnv {
  /** The environment with the SLUICE_* values the reference variables stand for filled in where absent. */
  env: NodeJS.ProcessEnv;
  settings: ReferenceSettings;
  /** Every variable looked at. */
  read: ReadonlySet<string>;
}

/** Throws UsageError (naming the variable) for a value sluice cannot honour. */
export function readReferenceEnv(env: NodeJS.ProcessEnv, own: OwnSetting): ReferenceEnv {
  const r = new ReferenceReader(env, own);
  const layout = r.referenceEnvironment();
  const server = readServer(r, layout);
  const redis = readRedis(r);
  const runtime = readRuntime(r);
  const telemetry = readTelemetry(r);
  const behaviour = readBehaviour(r, layout);
  const merged: NodeJS.ProcessEnv = { ...env };
  for (const [name, value] of Object.entries(r.sluiceEnv)) {
    if (merged[name] === undefined || merged[name] === "") merged[name] = value;
  }
  return {
    env: merged,
    read: r.read,
    settings: {
      referenceLayout: layout,
      ...server,
      ...telemetry,
      ...behaviour,
      healthCheck: { atLeastOneDomain: runtime.atLeastOneDomain, storeConnected: redis.storeConnected },
      forceStartWithoutRules: runtime.forceStartWithoutRules,
      runtimeLayout: runtime.runtimeLayout,
      ...(runtime.xdsTuning ? { xdsTuning: runtime.xdsTuning } : {}),
      referenceNotes: r.notes,
    },
  };
}
