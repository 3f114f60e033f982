// `sluice check [DIR]`: loads the rule directory as serve would and says what it holds, or each error (exit 1).
import path from "node:path";
import { loadRuleDir } from "../rules/load.js";
import { formatRuleError, type RuleSet } from "../rules/model.js";
import { footprint, footprintLine } from "../inspect/footprint.js";
import { CHECK_FLAGS, parseFlags, ruleDirSettings, UsageError } from "../settings/settings.js";
import { commandHelp } from "../settings/usage.js";
import { refuseEmptyRuleDir } from "../rules/empty-dir.js";

export function check(args: string[]): number {
  const { values, positionals } = parseFlags(CHECK_FLAGS, args, true);
  if (values.help) {
    process.stdout.write(commandHelp("check"));
    return 0;
  }
  if (positionals.length > 1) throw new UsageError("check takes one directory");
  if (positionals.length === 1 && values.config !== undefined) throw new UsageError("give the rule directory once: DIR or --config DIR");
  const { configDir: dir, mergeDomains, failureMode, allowEmptyRules } = ruleDirSettings({ ...values, config: positionals[0] ?? values.config }, process.env);
  const result = refuseEmptyRuleDir(dir, loadRuleDir(dir, { mergeDomains, failureMode }), allowEmptyRules);
  for (const w of result.warnings) process.stderr.write(`warning: ${w}\n`);
  if (!result.rules) {
    for (const e of result.errors) process.stderr.write(formatRuleError(e) + "\n");
    return 1;
  }
  process.stdout.write("ok\n");
  for (const line of summarize(result.rules)) process.stdout.write(line + "\n");
  if (result.rules.domains.size > 0) process.stdout.write(footprintLine(footprint(result.rules)) + "\n");
  return 0;
}

function summarize(rules: RuleSet): string[] {
  return [...rules.domains.values()].map(
    (d) => `domain ${d.domain}: ${d.ruleCount} limit${d.ruleCount === 1 ? "" : "s"} from ${d.files.map((f) => path.basename(f)).join(", ")}`,
  );
}
