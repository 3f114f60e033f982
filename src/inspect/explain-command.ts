// `sluice explain --config DIR --domain D --descriptor k=v[,k=v...] [--descriptor ...] [--at TIME]`:
// flags -> rules -> explain text. Exit 0 with the explanation, 1 when the rules fail to load; usage
// errors are thrown as UsageError (exit 2).
import { parseArgs } from "node:util";
import type { Entry } from "../limiter/types.js";
import { loadRuleDir } from "../rules/load.js";
import { formatRuleError } from "../rules/model.js";
import { EXPLAIN_FLAGS, keyPrefix, UsageError } from "../settings.js";
import { explain, parseDescriptorArg } from "./explain.js";

interface Out {
  write(text: string): unknown;
}

export function explainCommand(args: string[], env: NodeJS.ProcessEnv, stdout: Out, stderr: Out): number {
  let values;
  try {
    ({ values } = parseArgs({ args, options: EXPLAIN_FLAGS, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (!values.domain) throw new UsageError("explain needs --domain");
  const raw = values.descriptor ?? [];
  if (raw.length === 0) throw new UsageError("explain needs at least one --descriptor k=v[,k=v...]");
  const descriptors: Entry[][] = raw.map((text) => {
    try {
      return parseDescriptorArg(text);
    } catch (err) {
      throw new UsageError(`--descriptor '${text}': ${(err as Error).message}`);
    }
  });
  let nowMs = Date.now();
  if (values.at !== undefined) {
    nowMs = Date.parse(values.at);
    if (Number.isNaN(nowMs)) throw new UsageError(`--at must be a time like 2026-10-31T23:59:00Z, got '${values.at}'`);
  }
  const dir = values.config ?? env.SLUICE_CONFIG ?? "config";
  // As `serve` reads it: flag, SLUICE_KEY_PREFIX, then the reference's CACHE_KEY_PREFIX.
  const prefix = keyPrefix(values["key-prefix"] ?? (env.SLUICE_KEY_PREFIX || env.CACHE_KEY_PREFIX || undefined));
  const mergeDomains = values["merge-domains"] ?? /^(1|true|yes|on)$/i.test(env.SLUICE_MERGE_DOMAINS ?? "");
  const result = loadRuleDir(dir, { mergeDomains });
  for (const w of result.warnings) stderr.write(`warning: ${w}\n`);
  if (!result.rules) {
    for (const e of result.errors) stderr.write(formatRuleError(e) + "\n");
    return 1;
  }
  stdout.write(explain(result.rules, values.domain, descriptors, nowMs, prefix));
  return 0;
}
