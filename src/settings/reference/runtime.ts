// The reference's rule loading: RUNTIME_* (the rule directory), CONFIG_TYPE and xDS, domain merging,
// start without rules, and the health rule about loaded rules.
import { ENV } from "../../core/settings-table.js";
import path from "node:path";
import { goMap } from "../../core/go-values.js";
import type { ReferenceReader } from "./reader.js";
import { DEFAULT_XDS_TUNING, type XdsTuning } from "../../xds/xds-settings.js";

interface RuntimePart {
  /** FORCE_START_WITHOUT_INITIAL_CONFIG: rules that fail to load at start do not stop sluice. */
  forceStartWithoutRules: boolean;
  /** HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: /healthcheck fails while no domain is loaded. */
  atLeastOneDomain: boolean;
  /** The rule directory came from RUNTIME_*; what the reference would load beyond sluice is checked at start. */
  runtimeLayout?: { dir: string; ignoreDotFiles: boolean };
  /** CONFIG_TYPE=GRPC_XDS_SOTW or --config-xds: the reference's xDS client settings. */
  xdsTuning?: XdsTuning;
}

/** Where the control plane is and who sluice is to it: mapped onto sluice's own --config-xds, node id and TLS variables. */
const XDS_TARGET = [
  "CONFIG_GRPC_XDS_NODE_ID",
  "CONFIG_GRPC_XDS_SERVER_URL",
  "CONFIG_GRPC_XDS_SERVER_USE_TLS",
  "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
  "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
  "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
  "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
];
/** How the client behaves: read with CONFIG_TYPE=GRPC_XDS_SOTW and with sluice's own --config-xds alike. */
const XDS_TUNING = [
  "CONFIG_GRPC_XDS_NODE_METADATA",
  "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
  "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
  "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
  "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
  "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
  "XDS_CLIENT_BACKOFF_JITTER",
  "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
];
const RUNTIME = ["RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_IGNOREDOTFILES", "RUNTIME_WATCH_ROOT"];

export function readRuntime(r: ReferenceReader): RuntimePart {
  const configType = r.str("CONFIG_TYPE", "FILE");
  if (configType !== "FILE" && configType !== "GRPC_XDS_SOTW") throw r.error("CONFIG_TYPE", "must be FILE or GRPC_XDS_SOTW");
  const xds = configType === "GRPC_XDS_SOTW";
  const ownXds = r.own("config-xds", ENV.CONFIG_XDS);
  if (xds) readXdsTarget(r, ownXds);
  else for (const v of XDS_TARGET) r.ignore(v, "used only with CONFIG_TYPE=GRPC_XDS_SOTW");
  let xdsTuning: XdsTuning | undefined;
  // Unset ones take the reference's defaults under its CONFIG_TYPE, sluice's own beside --config-xds.
  if (xds || ownXds) xdsTuning = readXdsTuning(r, xds ? REFERENCE_XDS_TUNING : DEFAULT_XDS_TUNING);
  else for (const v of XDS_TUNING) r.ignore(v, "used only with CONFIG_TYPE=GRPC_XDS_SOTW (or sluice's --config-xds)");
  const common = {
    forceStartWithoutRules: r.bool("FORCE_START_WITHOUT_INITIAL_CONFIG", false),
    atLeastOneDomain: r.bool("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false),
    ...(xdsTuning ? { xdsTuning } : {}),
  };
  readMergeDomains(r);
  if (xds || ownXds) {
    // As in the reference: with rules from xDS the runtime directory is not read.
    for (const v of RUNTIME) r.ignore(v, "rules come from the xDS server (CONFIG_TYPE=GRPC_XDS_SOTW or --config-xds): no rule directory is read");
    return common;
  }

  const ignoreDotFiles = r.bool("RUNTIME_IGNOREDOTFILES", false);
  r.bool("RUNTIME_WATCH_ROOT", true); // checked; sluice watches either way
  r.ignore(
    "RUNTIME_WATCH_ROOT",
    "sluice reloads on any change in the rule directory and re-reads it every SLUICE_RELOAD_INTERVAL_S (a swapped RUNTIME_ROOT symlink is seen within that time)",
  );
  let runtimeLayout: RuntimePart["runtimeLayout"];
  const runtime = ["RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"];
  if (runtime.some((v) => r.isSet(v))) {
    if (r.own("config", ENV.CONFIG)) {
      for (const v of [...runtime, "RUNTIME_IGNOREDOTFILES"]) r.ignore(v, "sluice's own --config (or SLUICE_CONFIG) is given and wins");
    } else {
      const dir = path.join(r.str("RUNTIME_ROOT", "/srv/runtime_data/current"), r.str("RUNTIME_SUBDIRECTORY", ""), appDirectory(r));
      r.map(ENV.CONFIG, dir);
      runtimeLayout = { dir, ignoreDotFiles };
    }
  }

  return { ...common, runtimeLayout };
}

function readMergeDomains(r: ReferenceReader): void {
  if (r.has("MERGE_DOMAIN_CONFIG") && !r.own("merge-domains", ENV.MERGE_DOMAINS)) {
    r.map(ENV.MERGE_DOMAINS, String(r.bool("MERGE_DOMAIN_CONFIG", false)));
  }
}

/** CONFIG_GRPC_XDS_SERVER_URL, NODE_ID and the TLS files -> sluice's own --config-xds, node id and TLS variables (those win). */
function readXdsTarget(r: ReferenceReader, ownXds: boolean): void {
  const url = r.str("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000");
  if (ownXds) r.ignore("CONFIG_GRPC_XDS_SERVER_URL", "sluice's own --config-xds (or SLUICE_CONFIG_XDS) is given and wins");
  else r.map(ENV.CONFIG_XDS, url);
  if (!r.own(undefined, ENV.XDS_NODE_ID)) r.map(ENV.XDS_NODE_ID, r.str("CONFIG_GRPC_XDS_NODE_ID", "default"));
  const files = ["CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN"];
  if (!r.bool("CONFIG_GRPC_XDS_SERVER_USE_TLS", false)) {
    for (const f of files) r.ignore(f, "used only with CONFIG_GRPC_XDS_SERVER_USE_TLS=true, as in the reference");
    return;
  }
  const own = [ENV.XDS_TLS, ENV.XDS_TLS_CA, ENV.XDS_TLS_CERT, ENV.XDS_TLS_KEY, ENV.XDS_TLS_SERVER_NAME];
  if (own.some((v) => r.own(undefined, v))) {
    for (const f of files) r.ignore(f, "sluice's own TLS variables for the control plane (SLUICE_XDS_TLS and its files) are given and win");
    return;
  }
  // The reference loads a client certificate only when both files are given; one alone is a mistake here.
  if (r.has("CONFIG_GRPC_XDS_CLIENT_TLS_CERT") !== r.has("CONFIG_GRPC_XDS_CLIENT_TLS_KEY")) {
    throw r.error(
      r.has("CONFIG_GRPC_XDS_CLIENT_TLS_CERT") ? "CONFIG_GRPC_XDS_CLIENT_TLS_CERT" : "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
      "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together",
    );
  }
  r.map(ENV.XDS_TLS, "true");
  const pairs: [string, string][] = [
    ["CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ENV.XDS_TLS_CA],
    ["CONFIG_GRPC_XDS_CLIENT_TLS_CERT", ENV.XDS_TLS_CERT],
    ["CONFIG_GRPC_XDS_CLIENT_TLS_KEY", ENV.XDS_TLS_KEY],
    ["CONFIG_GRPC_XDS_SERVER_TLS_SAN", ENV.XDS_TLS_SERVER_NAME],
  ];
  for (const [ref, own] of pairs) if (r.has(ref)) r.map(own, r.str(ref, ""));
}

/** The reference's defaults (its settings.go): its backoff keeps every wait at 10 s (xds/backoff.ts). */
const REFERENCE_XDS_TUNING: XdsTuning = {
  ...DEFAULT_XDS_TUNING,
  connectRetryMs: 3000,
  backoff: { initialMs: 10_000, maxMs: 60_000, factor: 0.5, jitter: true },
};

/** The client's behaviour, read as the reference reads it (see xds/backoff.ts for the backoff's meaning). */
function readXdsTuning(r: ReferenceReader, d: XdsTuning): XdsTuning {
  // "k=v,k2=v2"; an item without '=' is skipped, as the reference skips it.
  const nodeMetadata: Record<string, string> = {};
  for (const item of r.str("CONFIG_GRPC_XDS_NODE_METADATA", "").split(",")) {
    const eq = item.indexOf("=");
    if (eq >= 0) nodeMetadata[item.slice(0, eq)] = item.slice(eq + 1);
  }
  const headers = goMap(r.str("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ""));
  if (!headers) throw r.error("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "takes name:value,name:value");
  for (const name of Object.keys(headers)) {
    if (!/^[0-9a-z_.-]+$/i.test(name) || /^(grpc-|:)/i.test(name)) {
      throw r.error("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", `'${name}' cannot be a gRPC metadata name (letters, digits, - _ . and not grpc-…)`);
    }
  }
  const connectRetryMs = r.durationMs("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", d.connectRetryMs);
  if (connectRetryMs < 10) throw r.error("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "must be at least 10ms");
  // jpillora/backoff's defaults stand in for 0, as in the reference.
  const initialMs = r.durationMs("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", d.backoff.initialMs) || 100;
  const maxMs = r.durationMs("XDS_CLIENT_BACKOFF_MAX_INTERVAL", d.backoff.maxMs) || 10_000;
  const factor = r.float("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", d.backoff.factor);
  const jitter = r.bool("XDS_CLIENT_BACKOFF_JITTER", d.backoff.jitter);
  const maxMessageBytes = r.int("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", 0, 0, 256 << 20) || d.maxMessageBytes;
  return { nodeMetadata, headers: headers as Record<string, string>, connectRetryMs, backoff: { initialMs, maxMs, factor, jitter }, maxMessageBytes };
}

/** RUNTIME_APPDIRECTORY: "config" when unset; set to empty, the rule files sit in RUNTIME_ROOT/RUNTIME_SUBDIRECTORY. */
function appDirectory(r: ReferenceReader): string {
  return r.isSet("RUNTIME_APPDIRECTORY") ? r.str("RUNTIME_APPDIRECTORY", "") : "config";
}
