// SLUICE_STATSD, SLUICE_STATSD_PROTOCOL, SLUICE_STATSD_FLUSH_MS, SLUICE_STATSD_TAGS -> StatsdSettings.
// The reference's USE_STATSD / STATSD_* / STATS_FLUSH_INTERVAL / EXTRA_TAGS arrive here mapped onto these
// (compat/ref-telemetry.ts).
import { envText, TEXT_SETTINGS } from "../core/text-settings.js";
import { ENV } from "../core/setting-names.js";
import { goMap } from "../core/go-values.js";
import { parseHostPort } from "../core/host-port.js";
import { UsageError } from "../core/usage-error.js";
import type { StatsdSettings } from "./statsd.js";

const DEFAULT_STATSD_FLUSH_MS = 10_000;

/** The settings, undefined when SLUICE_STATSD is unset; a bad value throws UsageError naming the variable. */
export function statsdSettings(env: NodeJS.ProcessEnv): StatsdSettings | undefined {
  const target = env[ENV.STATSD];
  if (target === undefined || target === "") return undefined;
  const addr = parseHostPort(target);
  if (!addr) throw new UsageError(`SLUICE_STATSD must be host:port (e.g. localhost:8125, [::1]:8125), got '${target}'`, ENV.STATSD);
  const protocol = envText(env, TEXT_SETTINGS.STATSD_PROTOCOL) as "udp" | "tcp";
  const rawFlush = env[ENV.STATSD_FLUSH_MS];
  const flushMs = rawFlush === undefined || rawFlush === "" ? DEFAULT_STATSD_FLUSH_MS : Number(rawFlush);
  if (!Number.isInteger(flushMs) || flushMs < 10 || flushMs > 3_600_000) {
    throw new UsageError(`SLUICE_STATSD_FLUSH_MS must be an integer from 10 to 3600000, got '${rawFlush}'`, ENV.STATSD_FLUSH_MS);
  }
  const tags = goMap(env[ENV.STATSD_TAGS] ?? "");
  if (!tags) throw new UsageError(`SLUICE_STATSD_TAGS takes tag:value[,tag:value...], got '${env[ENV.STATSD_TAGS]}'`, ENV.STATSD_TAGS);
  for (const key of Object.keys(tags)) {
    // '.' and '=' in a key would change how the tag is read back out of the name.
    if (!/^[A-Za-z0-9_-]*$/.test(key)) throw new UsageError(`SLUICE_STATSD_TAGS: tag '${key}' may hold only letters, digits, '_' and '-'`, ENV.STATSD_TAGS);
  }
  return { ...addr, protocol, flushMs, tags };
}
