// One strict reader per kind of setting (issue 42): every yes/no setting of the table, every yes/no variable of the
// reference's, and every setting with a closed set of values takes exactly its spellings; anything else is a usage
// error naming the variable (and the values allowed), never a silent "no".
import { describe, expect, it } from "vitest";
import { REFERENCE_DEFAULTS } from "../../src/settings/reference/defaults.js";
import { NO, readBool, SETTINGS, YES, yesNo, type Setting } from "../../src/core/settings-table.js";
import { FAILURE_MODES } from "../../src/rules/limits.js";
import { ruleDirSettings, serveSettings, UsageError, type Settings } from "../../src/settings/settings.js";

/** Go's strconv.ParseBool, the reference's reader: exactly these. */
const GO_TRUE = ["1", "t", "T", "TRUE", "true", "True"];
const GO_FALSE = ["0", "f", "F", "FALSE", "false", "False"];
const NEITHER = ["ture", "yes!", "tRuE", "TRue", " true", "true ", "2", "-1", "y", "n", "enabled", "nope"];

/** The usage error a call throws, or undefined. */
function usageError(f: () => unknown): UsageError | undefined {
  try {
    f();
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  return undefined;
}

describe("yesNo: the one yes/no reader", () => {
  it("takes every spelling Go's strconv.ParseBool takes, and sluice's yes/no and on/off", () => {
    for (const v of GO_TRUE) expect(yesNo(v), v).toBe(true);
    for (const v of GO_FALSE) expect(yesNo(v), v).toBe(false);
    expect(["yes", "Yes", "YES", "on", "On", "ON"].map(yesNo)).toEqual([true, true, true, true, true, true]);
    expect(["no", "No", "NO", "off", "Off", "OFF"].map(yesNo)).toEqual([false, false, false, false, false, false]);
    expect(YES).toEqual(expect.arrayContaining(GO_TRUE));
    expect(NO).toEqual(expect.arrayContaining(GO_FALSE));
  });

  it("takes nothing else", () => {
    for (const v of [...NEITHER, ""]) expect(yesNo(v), JSON.stringify(v)).toBeUndefined();
  });
});

/**
 * How each yes/no setting of the table shows in what its command reads: the arguments it needs to be read at all,
 * and the field it sets. A yes/no row added to the table without an entry here fails the first test below.
 */
const BOOL_READ: Record<string, { args?: string[]; serve: (s: Settings) => boolean }> = {
  MERGE_DOMAINS: { serve: (s) => s.mergeDomains },
  ALLOW_EMPTY_RULES: { serve: (s) => s.allowEmptyRules },
  REFERENCE_KEYS: { serve: (s) => s.referenceKeys !== undefined },
  XDS_TLS: { args: ["--config-xds", "cp.example:18000"], serve: (s) => s.configXds?.tls !== undefined },
  RESPONSE_HEADERS: { serve: (s) => s.responseHeaders.enabled },
  TOP: { serve: (s) => s.topSummaries },
};

const boolSettings = Object.entries(SETTINGS as Record<string, Setting>).filter(([, s]) => s.kind === "bool");

describe("every yes/no setting of the table", () => {
  it("is read by the one reader (the list below covers the table)", () => {
    expect(boolSettings.map(([k]) => k).sort()).toEqual(Object.keys(BOOL_READ).sort());
  });

  for (const [key, s] of boolSettings) {
    const { args = [], serve } = BOOL_READ[key] ?? { serve: () => false };
    const onCheck = (s.commands ?? []).some((c) => c !== "serve");

    it(`${s.env}: every spelling of yes is on, every spelling of no is off, unset is its default`, () => {
      for (const v of YES) expect(serve(serveSettings(args, { [s.env]: v })), `${s.env}=${v}`).toBe(true);
      for (const v of NO) expect(serve(serveSettings(args, { [s.env]: v })), `${s.env}=${v}`).toBe(false);
      expect(serve(serveSettings(args, {}))).toBe("default" in s && s.default === true);
      expect(serve(serveSettings(args, { [s.env]: "" }))).toBe("default" in s && s.default === true);
    });

    it(`${s.env}: anything else is a usage error naming it${onCheck ? ", in check and explain too" : ""}`, () => {
      for (const v of NEITHER) {
        const err = usageError(() => serveSettings(args, { [s.env]: v }));
        expect(err?.message, `${s.env}=${v}`).toBe(`${s.env} must be true or false (or 1/0, t/f, yes/no, on/off), got '${v}'`);
        expect(err?.setting).toBe(s.env);
        if (onCheck) expect(usageError(() => ruleDirSettings({}, { [s.env]: v }))?.setting).toBe(s.env);
      }
    });
  }

  it("a flag that stands for one wins over its variable, even a bad one", () => {
    expect(serveSettings(["--merge-domains"], { SLUICE_MERGE_DOMAINS: "ture" }).mergeDomains).toBe(true);
    expect(readBool({ SLUICE_MERGE_DOMAINS: "true" }, SETTINGS.MERGE_DOMAINS, false)).toBe(false);
  });
});

describe("every yes/no variable of the reference's", () => {
  const names = Object.entries(REFERENCE_DEFAULTS).filter(([, d]) => d === "true" || d === "false");

  it("covers the ones it has", () => {
    expect(names.length).toBeGreaterThan(20);
  });

  for (const [name] of names) {
    it(`${name}: each of Go's spellings is accepted; anything else is a usage error naming it, even where sluice does not use it`, () => {
      for (const v of [...GO_TRUE, ...GO_FALSE]) {
        const err = usageError(() => serveSettings([], { [name]: v }));
        // Some values are refused for what they mean (REDIS_TLS_SKIP_HOSTNAME_VERIFICATION=true), never as a spelling.
        expect(err?.message ?? "", `${name}=${v}`).not.toContain("must be true or false");
      }
      const err = usageError(() => serveSettings([], { [name]: "ture" }));
      expect(err?.message).toBe(`${name}=ture (envoyproxy/ratelimit setting): must be true or false (or 1/0, t/f, yes/no, on/off)`);
      expect(err?.setting).toBe(name);
    });
  }
});

describe("every setting with a closed set of values", () => {
  const closed = Object.values(SETTINGS as Record<string, Setting>).filter((s): s is Setting & { choices: readonly string[] } => "choices" in s && !!s.choices);

  it("has its choices in the table (failure mode, log level and format, tracing, statsd protocol, dynamic metadata)", () => {
    expect(closed.map((s) => s.env).sort()).toEqual(
      ["SLUICE_FAILURE_MODE", "SLUICE_LOG_FORMAT", "SLUICE_LOG_LEVEL", "SLUICE_RESPONSE_DYNAMIC_METADATA", "SLUICE_STATSD_PROTOCOL", "SLUICE_TRACING"].sort(),
    );
    // A rule's failure_mode and the setting's default for it take the same words.
    expect(SETTINGS.FAILURE_MODE.choices).toEqual(FAILURE_MODES);
  });

  for (const s of closed) {
    // The statsd protocol is read with a statsd address only.
    const env = s.env === "SLUICE_STATSD_PROTOCOL" ? { SLUICE_STATSD: "127.0.0.1:8125" } : {};
    it(`${s.env}: each choice is accepted; anything else is a usage error naming it and the values allowed`, () => {
      for (const v of s.choices)
        expect(
          usageError(() => serveSettings([], { ...env, [s.env]: v })),
          `${s.env}=${v}`,
        ).toBeUndefined();
      for (const v of ["bogus", s.choices[0].toUpperCase(), ` ${s.choices[0]}`]) {
        const err = usageError(() => serveSettings([], { ...env, [s.env]: v }));
        const allowed = s.choices.length === 2 ? s.choices.join(" or ") : `one of ${s.choices.join(", ")}`;
        expect(err?.message, `${s.env}=${v}`).toBe(`${s.env} must be ${allowed}, got '${v}'`);
        expect(err?.setting).toBe(s.env);
      }
    });
  }

  it("a flag's bad value names the flag; the failure mode is checked by check and explain too", () => {
    expect(usageError(() => serveSettings(["--failure-mode", "open"], {}))?.message).toBe(
      "--failure-mode must be one of allow, deny, local, error, got 'open'",
    );
    expect(usageError(() => serveSettings(["--log-level", "loud"], {}))?.setting).toBe("--log-level");
    expect(usageError(() => ruleDirSettings({}, { SLUICE_FAILURE_MODE: "open" }))?.setting).toBe("SLUICE_FAILURE_MODE");
    expect(ruleDirSettings({}, { SLUICE_FAILURE_MODE: "deny" }).failureMode).toBe("deny");
  });
});
