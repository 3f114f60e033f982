// SLUICE_STATSD, SLUICE_STATSD_PROTOCOL, SLUICE_STATSD_FLUSH_MS, SLUICE_STATSD_TAGS -> StatsdSettings.
// The reference's USE_STATSD / STATSD_* / STATS_FLUSH_INTERVAL / EXTRA_TAGS arrive here mapped onto these
// (settings/reference/telemetry.ts).
import { ENV, readInt, readText, SETTINGS } from "../core/settings-table.js";
import { goMap } from "../core/go-values.js";
import { parseHostPort } from "../core/host-port.js";
import { UsageError } from "../core/usage-error.js";
import type { StatsdSettings } from "./statsd.js";

/** The settings, undefined when SLUICE_STATSD is unset; a bad value throws UsageError naming the variable. */
export function statsdSettings(env: NodeJS.ProcessEnv): StatsdSettings | undefined {
  const target = env[ENV.STATSD];
  if (target === undefined || target === "") return undefined;
  const addr = parseHostPort(target);
  if (!addr) throw new UsageError(`SLUICE_STATSD must be host:port (e.g. localhost:8125, [::1]:8125), got '${target}'`, ENV.STATSD);
  const protocol = readText(env, SETTINGS.STATSD_PROTOCOL) as "udp" | "tcp";
  const flushMs = readInt(env, SETTINGS.STATSD_FLUSH_MS);
  const tags = goMap(env[ENV.STATSD_TAGS] ?? "");
  if (!tags) throw new UsageError(`SLUICE_STATSD_TAGS takes tag:value[,tag:value...], got '${env[ENV.STATSD_TAGS]}'`, ENV.STATSD_TAGS);
  for (const key of Object.keys(tags)) {
    // '.' and '=' in a key would change how the tag is read back out of the name.
    if (!/^[A-Za-z0-9_-]*$/.test(key)) throw new UsageError(`SLUICE_STATSD_TAGS: tag '${key}' may hold only letters, digits, '_' and '-'`, ENV.STATSD_TAGS);
  }
  return { ...addr, protocol, flushMs, tags };
}
