// `sluice explain [--config DIR] --domain D [--descriptor k=v[,k=v...] ...] [--bucket k=v[,k=v...] ...] [--at TIME]`:
// flags -> rules -> explain text. Exit 0 with the explanation, 1 when the rules fail to load; usage
// errors are thrown as UsageError (exit 2).
import { SecretValues } from "../core/secret.js";
import { ENV, readBool, SETTINGS } from "../core/settings-table.js";
import type { DescriptorEntry } from "../limiter/types.js";
import { loadRuleDir } from "../rules/load.js";
import { formatRuleError } from "../rules/model.js";
import { refuseEmptyRuleDir } from "../rules/empty-dir.js";
import { EXPLAIN_FLAGS, keyPrefix, parseFlags, ruleDirSettings, UsageError } from "../settings/settings.js";
import { explain, parseBucketArg, parseDescriptorArg } from "../inspect/explain.js";

interface Out {
  write(text: string): unknown;
}

export function explainCommand(args: string[], env: NodeJS.ProcessEnv, stdout: Out, stderr: Out): number {
  const { values } = parseFlags(EXPLAIN_FLAGS, args);
  if (!values.domain) throw new UsageError("explain needs --domain");
  const raw = values.descriptor ?? [];
  const rawBuckets = values.bucket ?? [];
  if (raw.length === 0 && rawBuckets.length === 0) throw new UsageError("explain needs at least one --descriptor k=v[,k=v...] or --bucket k=v[,k=v...]");
  const parsed = (flag: string, text: string, parse: (t: string) => DescriptorEntry[]) => {
    try {
      return parse(text);
    } catch (err) {
      throw new UsageError(`--${flag} '${text}': ${(err as Error).message}`);
    }
  };
  const descriptors = raw.map((text) => parsed("descriptor", text, parseDescriptorArg));
  const buckets = rawBuckets.map((text) => parsed("bucket", text, parseBucketArg));
  let nowMs = Date.now();
  if (values.at !== undefined) {
    nowMs = Date.parse(values.at);
    if (Number.isNaN(nowMs)) throw new UsageError(`--at must be a time like 2026-10-31T23:59:00Z, got '${values.at}'`);
  }
  // As `serve` reads them: flag, SLUICE_*, then the reference's variables (RUNTIME_*, CACHE_KEY_PREFIX, ...).
  const rules = ruleDirSettings(values, env);
  const prefix = keyPrefix(values["key-prefix"] ?? (rules.env[ENV.KEY_PREFIX] || undefined));
  const result = refuseEmptyRuleDir(
    rules.configDir,
    loadRuleDir(rules.configDir, { mergeDomains: rules.mergeDomains, failureMode: rules.failureMode }),
    rules.allowEmptyRules,
  );
  for (const w of result.warnings) stderr.write(`warning: ${w}\n`);
  if (!result.rules) {
    for (const e of result.errors) stderr.write(formatRuleError(e) + "\n");
    return 1;
  }
  // As serve would count: the reference's keys when SLUICE_REFERENCE_KEYS (or the reference's environment) says so.
  const referenceKeys = readBool(rules.env, SETTINGS.REFERENCE_KEYS);
  // The values of secret keys show as the hash serve writes: the same keys and hash key as serve reads.
  const secretKeys = rules.env[ENV.TOP_SECRET_KEYS];
  const secrets = new SecretValues(
    secretKeys === undefined
      ? [...SETTINGS.TOP_SECRET_KEYS.default]
      : secretKeys
          .split(",")
          .map((k) => k.trim())
          .filter((k) => k !== ""),
    rules.env[ENV.TOP_HASH_KEY] || SETTINGS.TOP_HASH_KEY.default,
  );
  secrets.learn(result.rules);
  stdout.write(explain(result.rules, values.domain, descriptors, nowMs, prefix, referenceKeys, secrets, buckets));
  return 0;
}
