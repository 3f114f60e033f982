// `sluice top [--admin HOST:PORT] [--window 1m|1h] [--rule RULE] [--clients N] [--once] [--json]`: the /top of a
// running sluice, redrawn every second like top(1): rules by refusals with their distinct refused
// clients, and the most refused clients of the first rule (or of --rule). --once prints one view and
// exits; --json prints /top's JSON as it is. With SLUICE_ADMIN_TOKEN_FILE set it sends that token (an admin
// port bound beyond loopback asks it of remote clients).
import { parseHostPort } from "../core/host-port.js";
import { ENV } from "../core/settings-table.js";
import { readToken } from "../server/admin/admin-access.js";
import { defaultAdminAddress, parseFlags, TOP_FLAGS, UsageError } from "../settings/settings.js";
import type { TopRule } from "../insight/top-query.js";

interface Out {
  write(text: string): unknown;
}

interface TopAnswer {
  window: string;
  rules: TopRule[];
}

const REFRESH_MS = 1000;
const FETCH_TIMEOUT_MS = 3000;

export async function topCommand(args: string[], stdout: Out & { isTTY?: boolean }, stderr: Out, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values } = parseFlags(TOP_FLAGS, args);
  const tokenFile = env[ENV.ADMIN_TOKEN_FILE];
  const headers: Record<string, string> = tokenFile ? { authorization: `Bearer ${readToken(tokenFile)}` } : {};
  const fetchTop = (url: string) => fetchTopFrom(url, headers);
  const admin = values.admin ?? defaultAdminAddress(env);
  if (!parseHostPort(admin)) throw new UsageError(`--admin takes HOST:PORT, got '${admin}'`, "--admin");
  const window = values.window ?? "1m";
  if (window !== "1m" && window !== "1h") throw new UsageError(`--window takes 1m or 1h, got '${window}'`);
  const nText = values.clients ?? "5";
  if (!/^\d{1,2}$/.test(nText)) throw new UsageError(`--clients takes a whole number from 0 to 99, got '${nText}'`);
  const query = new URLSearchParams({ window, n: nText });
  const url = `http://${admin}/top?${query}`;
  // The clients of one rule: the chosen one, or the most refusing.
  const ruleUrl = (rule: string) => `http://${admin}/top?${new URLSearchParams({ window, n: nText, rule })}`;

  const once = async (): Promise<string> => {
    const all = await fetchTop(url);
    if (values.json) {
      if (values.rule === undefined) return JSON.stringify(all) + "\n";
      return JSON.stringify(await fetchTop(ruleUrl(values.rule))) + "\n";
    }
    const chosen = values.rule ?? all.rules[0]?.rule;
    const detail = chosen === undefined ? undefined : await fetchTop(ruleUrl(chosen));
    return render(admin, all, detail, chosen);
  };
  if (values.once || values.json) {
    try {
      stdout.write(await once());
      return 0;
    } catch (err) {
      stderr.write(`sluice top: ${(err as Error).message}\n`);
      return 1;
    }
  }
  for (;;) {
    let text: string;
    try {
      text = await once();
    } catch (err) {
      text = `sluice top: ${(err as Error).message}\n`;
    }
    // Clear the screen and draw again, as top does (plain lines when not a terminal).
    stdout.write((stdout.isTTY ? "\x1b[H\x1b[2J" : "") + text);
    await new Promise((r) => setTimeout(r, REFRESH_MS));
  }
}

async function fetchTopFrom(url: string, headers: Record<string, string>): Promise<TopAnswer> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) }).catch((err: Error) => {
    throw new Error(`cannot reach ${url}: ${err.cause instanceof Error ? err.cause.message : err.message}`);
  });
  const body = await res.text();
  if (!res.ok) throw new Error(`${url}: ${res.status} ${errorText(body)}`);
  return JSON.parse(body) as TopAnswer;
}

/** An error answer's sentence: /top's JSON `error`, or the text as it is. */
function errorText(body: string): string {
  try {
    const said = (JSON.parse(body) as { error?: unknown }).error;
    if (typeof said === "string") return said;
  } catch {
    /* not JSON */
  }
  return body.trim();
}

function render(admin: string, all: TopAnswer, detail: TopAnswer | undefined, chosen: string | undefined): string {
  const lines = [`sluice top - ${admin} - window ${all.window} - ${new Date().toISOString().slice(11, 19)} UTC`, ""];
  if (all.rules.length === 0) lines.push("no refusals in this window");
  else {
    lines.push(pad(["REFUSED", "CLIENTS", "LIMIT", "RULE"]));
    for (const r of all.rules)
      lines.push(pad([String(r.refused), String(r.refused_clients), r.limit, `${r.rule}${r.domain === r.rule.split(".")[0] ? "" : ` (${r.domain})`}`]));
  }
  if (chosen !== undefined && detail) {
    lines.push("", `most refused clients of ${chosen}:`);
    const top = detail.rules.flatMap((r) => r.top);
    if (top.length === 0) lines.push("  none in this window");
    for (const c of top) lines.push(`  ${String(c.refused).padStart(9)}  ${c.client}`);
  }
  return lines.join("\n") + "\n";
}

function pad(cells: string[]): string {
  return `${cells[0].padStart(9)}  ${cells[1].padStart(9)}  ${cells[2].padEnd(14)}  ${cells[3]}`;
}
