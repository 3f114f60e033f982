// Values as envoyproxy/ratelimit reads them (Go's strconv and time.ParseDuration through envconfig),
// so a variable that worked there reads the same here. Each parser returns undefined for a value Go
// would refuse too; the caller turns that into an error naming the variable. Yes/no values have one
// reader for every setting, the settings table's yesNo (Go's spellings and sluice's own).
import { parseHostPort, type HostPort } from "../core/host-port.js";

/** A decimal integer (optionally signed), within Number's exact range. */
export function goInt(raw: string): number | undefined {
  if (!/^[+-]?\d{1,15}$/.test(raw)) return undefined;
  return Number(raw);
}

/** strconv.ParseFloat(raw, 32) for plain decimal notation. */
export function goFloat(raw: string): number | undefined {
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw)) return undefined;
  const n = Number(raw);
  return Number.isFinite(n) ? n : undefined;
}

const DURATION_UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** time.ParseDuration ("300ms", "1.5h", "2h45m", "0") in milliseconds; negative values are refused. */
export function goDurationMs(raw: string): number | undefined {
  if (raw === "0" || raw === "+0") return 0;
  const body = raw.startsWith("+") ? raw.slice(1) : raw;
  if (body === "" || body.startsWith("-")) return undefined;
  let ms = 0;
  const part = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let at = 0;
  while (at < body.length) {
    part.lastIndex = at;
    const m = part.exec(body);
    if (!m) return undefined;
    ms += Number(m[1]) * DURATION_UNIT_MS[m[2]];
    at = part.lastIndex;
  }
  return ms;
}

/** envconfig's map form, "k1:v1,k2:v2" (each item split at its first ':'); empty = no items. */
export function goMap(raw: string): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  if (raw === "") return out;
  for (const item of raw.split(",")) {
    const colon = item.indexOf(":");
    if (colon < 0) return undefined;
    out[item.slice(0, colon)] = item.slice(colon + 1);
  }
  return out;
}

/** A Go listen address "host:port", ":port" or "[v6]:port"; host "" = every interface. */
export function goListenAddress(raw: string): HostPort | undefined {
  return parseHostPort(raw, { emptyHost: true, zeroPort: true });
}
