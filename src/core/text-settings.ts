// The environment variables without a flag that take a text: one entry each, with its default (written
// only here), the values it takes and the reference's variable that stands for it. At the bottom of src/ so
// every layer that reads one reads it through its entry.
import { ENV } from "./setting-names.js";
import { UsageError } from "./usage-error.js";

/**
 * A variable without a flag that takes a text: its default, the values it takes where they are few (else its
 * reader checks it), and the reference's variable that stands for it (compat/ maps that one onto it).
 */
export interface TextSetting {
  env: string;
  default: string;
  choices?: readonly string[];
  reference?: string;
}

/**
 * The text settings without a flag, each default written here once and read through its entry wherever the
 * setting is read (settings.ts, compat/, telemetry/, xds/, and the modules whose defaults they are); docs/configuration.md's
 * default column and its reference table are checked against them by test/unit/docs-configuration.test.ts.
 */
export const TEXT_SETTINGS = {
  RESPONSE_HEADER_LIMIT: { env: ENV.RESPONSE_HEADER_LIMIT, default: "RateLimit-Limit", reference: "LIMIT_LIMIT_HEADER" },
  RESPONSE_HEADER_REMAINING: { env: ENV.RESPONSE_HEADER_REMAINING, default: "RateLimit-Remaining", reference: "LIMIT_REMAINING_HEADER" },
  RESPONSE_HEADER_RESET: { env: ENV.RESPONSE_HEADER_RESET, default: "RateLimit-Reset", reference: "LIMIT_RESET_HEADER" },
  RESPONSE_DYNAMIC_METADATA: {
    env: ENV.RESPONSE_DYNAMIC_METADATA,
    default: "rules",
    choices: ["rules", "reference", "off"],
    reference: "RESPONSE_DYNAMIC_METADATA",
  },
  NEAR_LIMIT_RATIO: { env: ENV.NEAR_LIMIT_RATIO, default: "0.8", reference: "NEAR_LIMIT_RATIO" },
  TOP: { env: ENV.TOP, default: "on", choices: ["on", "off"] },
  STATSD_PROTOCOL: { env: ENV.STATSD_PROTOCOL, default: "udp", choices: ["udp", "tcp"] },
  XDS_NODE_ID: { env: ENV.XDS_NODE_ID, default: "default" },
} as const satisfies Record<string, TextSetting>;

/** A text setting's value: the variable when set and not empty, else its default; one of its choices where it has them. */
export function envText(env: NodeJS.ProcessEnv, s: TextSetting): string {
  const raw = env[s.env];
  const v = raw === undefined || raw === "" ? s.default : raw;
  if (s.choices && !s.choices.includes(v)) {
    const allowed = s.choices.length === 2 ? s.choices.join(" or ") : `one of ${s.choices.join(", ")}`;
    throw new UsageError(`${s.env} must be ${allowed}, got '${v}'`, s.env);
  }
  return v;
}
