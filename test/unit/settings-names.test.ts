// A SLUICE_* name is written once in src/: as a string literal ("SLUICE_X") or a property read (env.SLUICE_X).
// Not there yet (issue 31's settings table is unfinished): KNOWN_REPEATS lists the names still written more
// than once, measured when this test was added. The test fails when another name starts repeating, and
// when a listed name no longer repeats (take it off the list), so the list only shrinks.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const SRC = path.resolve(import.meta.dirname, "../../src");

const KNOWN_REPEATS = new Set([
  "SLUICE_ADMIN_HOST",
  "SLUICE_ADMIN_PORT",
  "SLUICE_ALLOW_EMPTY_RULES",
  "SLUICE_CONFIG",
  "SLUICE_CONFIG_XDS",
  "SLUICE_DENY_NOTE_MAX",
  "SLUICE_FAILURE_MODE",
  "SLUICE_HOST",
  "SLUICE_KEY_PREFIX",
  "SLUICE_LOG_FORMAT",
  "SLUICE_LOG_LEVEL",
  "SLUICE_MAX_CONNECTIONS",
  "SLUICE_MAX_CONNECTION_AGE_GRACE_MS",
  "SLUICE_MAX_CONNECTION_AGE_MS",
  "SLUICE_MERGE_DOMAINS",
  "SLUICE_NEAR_LIMIT_RATIO",
  "SLUICE_PORT",
  "SLUICE_REDIS",
  "SLUICE_REDIS_CLUSTER",
  "SLUICE_REDIS_PASSWORD_FILE",
  "SLUICE_REDIS_PER_SECOND",
  "SLUICE_REDIS_PER_SECOND_CLUSTER",
  "SLUICE_REDIS_PER_SECOND_SENTINEL",
  "SLUICE_REDIS_SENTINEL",
  "SLUICE_REFERENCE_KEYS",
  "SLUICE_RESPONSE_DYNAMIC_METADATA",
  "SLUICE_RESPONSE_HEADERS",
  "SLUICE_RESPONSE_HEADER_LIMIT",
  "SLUICE_RESPONSE_HEADER_REMAINING",
  "SLUICE_RESPONSE_HEADER_RESET",
  "SLUICE_STATSD",
  "SLUICE_STATSD_FLUSH_MS",
  "SLUICE_STATSD_PROTOCOL",
  "SLUICE_STATSD_TAGS",
  "SLUICE_TLS_CA",
  "SLUICE_TLS_CERT",
  "SLUICE_TLS_KEY",
  "SLUICE_TRACING",
  "SLUICE_TRACING_SAMPLING_RATE",
  "SLUICE_WORKERS",
  "SLUICE_XDS_NODE_ID",
  "SLUICE_XDS_TLS",
  "SLUICE_XDS_TLS_CA",
  "SLUICE_XDS_TLS_CERT",
  "SLUICE_XDS_TLS_KEY",
  "SLUICE_XDS_TLS_SERVER_NAME",
]);

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : p.endsWith(".ts") ? [p] : [];
  });
}

/** Each name's places: file:line of every literal or property read (comments and longer strings do not count). */
function places(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    fs.readFileSync(file, "utf8")
      .split("\n")
      .forEach((line, i) => {
        if (/^\s*(\/\/|\*|\/\*)/.test(line)) return;
        for (const m of line.matchAll(/["'`](SLUICE_[A-Z0-9_]+)["'`]|\.(SLUICE_[A-Z0-9_]+)\b/g)) {
          const name = m[1] ?? m[2];
          const list = out.get(name) ?? [];
          list.push(`${path.relative(SRC, file)}:${i + 1}`);
          out.set(name, list);
        }
      });
  }
  return out;
}

describe("SLUICE_* names in src/", () => {
  const found = places();

  it("writes no new name more than once", () => {
    const repeated = [...found].filter(([name, at]) => at.length > 1 && !KNOWN_REPEATS.has(name)).map(([name, at]) => `${name}: ${at.join(", ")}`);
    expect(repeated).toEqual([]);
  });

  it("lists only names that still repeat", () => {
    expect([...KNOWN_REPEATS].filter((name) => (found.get(name)?.length ?? 0) < 2)).toEqual([]);
  });

  it("finds the forms it counts", () => {
    expect(found.get("SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD_FILE")).toEqual([
      "settings-flags.ts:" + lineOf("settings-flags.ts", '"SLUICE_REDIS_PER_SECOND_SENTINEL_PASSWORD_FILE"'),
    ]);
  });
});

function lineOf(rel: string, text: string): number {
  return (
    fs
      .readFileSync(path.join(SRC, rel), "utf8")
      .split("\n")
      .findIndex((l) => l.includes(text)) + 1
  );
}
