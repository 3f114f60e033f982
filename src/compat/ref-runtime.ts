// The reference's rule loading: RUNTIME_* (the rule directory), CONFIG_TYPE and xDS, domain merging,
// start without rules, and the health rule about loaded rules.
import path from "node:path";
import type { ReferenceReader } from "./reader.js";

export interface RuntimePart {
  /** FORCE_START_WITHOUT_INITIAL_CONFIG: rules that fail to load at start do not stop sluice. */
  forceStartWithoutRules: boolean;
  /** HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: /healthcheck fails while no domain is loaded. */
  atLeastOneDomain: boolean;
  /** The rule directory came from RUNTIME_*; what the reference would load beyond sluice is checked at start. */
  runtimeLayout?: { dir: string; ignoreDotFiles: boolean };
}

const XDS = [
  "CONFIG_GRPC_XDS_NODE_ID", "CONFIG_GRPC_XDS_NODE_METADATA", "CONFIG_GRPC_XDS_SERVER_URL",
  "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "CONFIG_GRPC_XDS_SERVER_USE_TLS",
  "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
  "CONFIG_GRPC_XDS_SERVER_TLS_SAN", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
  "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "XDS_CLIENT_BACKOFF_JITTER", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
];

export function readRuntime(r: ReferenceReader): RuntimePart {
  const configType = r.str("CONFIG_TYPE", "FILE");
  if (configType === "GRPC_XDS_SOTW") {
    throw r.error("CONFIG_TYPE", "rules from an xDS server are not supported yet: use CONFIG_TYPE=FILE with rule files (RUNTIME_ROOT)");
  }
  if (configType !== "FILE") throw r.error("CONFIG_TYPE", "must be FILE");
  for (const v of XDS) r.ignore(v, "used only with CONFIG_TYPE=GRPC_XDS_SOTW, which sluice does not support yet");

  const ignoreDotFiles = r.bool("RUNTIME_IGNOREDOTFILES", false);
  r.bool("RUNTIME_WATCH_ROOT", true); // checked; sluice watches either way
  r.ignore(
    "RUNTIME_WATCH_ROOT",
    "sluice reloads on any change in the rule directory and re-reads it every SLUICE_RELOAD_INTERVAL_S (a swapped RUNTIME_ROOT symlink is seen within that time)",
  );
  let runtimeLayout: RuntimePart["runtimeLayout"];
  const runtime = ["RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"];
  if (runtime.some((v) => r.isSet(v))) {
    if (r.own("config", "SLUICE_CONFIG")) {
      for (const v of [...runtime, "RUNTIME_IGNOREDOTFILES"]) r.ignore(v, "sluice's own --config (or SLUICE_CONFIG) is given and wins");
    } else {
      const dir = path.join(r.str("RUNTIME_ROOT", "/srv/runtime_data/current"), r.str("RUNTIME_SUBDIRECTORY", ""), appDirectory(r));
      r.map("SLUICE_CONFIG", dir);
      runtimeLayout = { dir, ignoreDotFiles };
    }
  }

  if (r.has("MERGE_DOMAIN_CONFIG") && !r.own("merge-domains", "SLUICE_MERGE_DOMAINS")) {
    r.map("SLUICE_MERGE_DOMAINS", String(r.bool("MERGE_DOMAIN_CONFIG", false)));
  }
  return {
    forceStartWithoutRules: r.bool("FORCE_START_WITHOUT_INITIAL_CONFIG", false),
    atLeastOneDomain: r.bool("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false),
    runtimeLayout,
  };
}

/** RUNTIME_APPDIRECTORY: "config" when unset; set to empty, the rule files sit in RUNTIME_ROOT/RUNTIME_SUBDIRECTORY. */
function appDirectory(r: ReferenceReader): string {
  return r.isSet("RUNTIME_APPDIRECTORY") ? r.str("RUNTIME_APPDIRECTORY", "") : "config";
}
