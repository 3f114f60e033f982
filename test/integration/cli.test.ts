// The CLI contract: `sluice check`, usage errors, and `serve` refusing bad rules.
import { COMPAT_DIR } from "../helpers/compat.js";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { COMMAND_FLAGS } from "../../src/settings/settings.js";
import { MAIN, ROOT, ruleDir, runCli, startSluice } from "../helpers/sluice.js";

const COMPAT = path.join(COMPAT_DIR, "config");
const BAD_RULE = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n";
const GOOD_RULE = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n";
const VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).version;
const OPT_IN = "to start with no limits until rule files appear, give --allow-empty-rules (or SLUICE_ALLOW_EMPTY_RULES=true)";

describe("--help and --version", () => {
  it.each(Object.keys(COMMAND_FLAGS))("%s --help and -h: exit 0, every flag with its environment variable", (command) => {
    for (const flag of ["--help", "-h"]) {
      // A bad environment does not stand in the way of help.
      const r = runCli([command, flag], { SLUICE_PORT: "seventy" });
      expect([r.code, r.stderr], `${command} ${flag}`).toEqual([0, ""]);
      expect(r.stdout.startsWith(`usage:\n  sluice ${command} `)).toBe(true);
      for (const [name, spec] of Object.entries(COMMAND_FLAGS[command])) {
        const line = r.stdout.split("\n").find((l) => new RegExp(`^  (-[a-z], )?--${name}\\b`).test(l));
        expect(line, `${command} --${name}`).toBeDefined();
        if (spec.env) expect(line!.endsWith(`(${spec.env})`), line).toBe(true);
      }
    }
  });

  it("sluice --help, -h and help list the commands; help COMMAND is COMMAND --help", () => {
    for (const args of [["--help"], ["-h"], ["help"]]) {
      const r = runCli(args);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^commands:\n {2}serve +\S.*\n {2}check +\S.*\n {2}explain +\S/m);
    }
    expect(runCli(["help", "check"]).stdout).toBe(runCli(["check", "--help"]).stdout);
    expect(runCli(["help", "frobnicate"]).code).toBe(2);
  });

  it("--version and version print package.json's version", () => {
    for (const args of [["--version"], ["version"]]) expect(runCli(args)).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: "" });
    expect(runCli(["version", "extra"]).code).toBe(2);
  });
});

describe("check's rule directory: DIR, --config, SLUICE_CONFIG, as serve finds it", () => {
  const good = ruleDir({ "g.yaml": GOOD_RULE });
  const summary = "ok\ndomain d: 1 limit from g.yaml\n1 descriptor (1 limit), about 0.1 MiB in memory when served\n";

  it("--config DIR and DIR", () => {
    expect(runCli(["check", "--config", good]).stdout).toBe(summary);
    expect(runCli(["check", good]).stdout).toBe(summary);
    const both = runCli(["check", good, "--config", good]);
    expect([both.code, both.stderr.split("\n")[0]]).toEqual([2, "sluice: give the rule directory once: DIR or --config DIR"]);
  });

  it("SLUICE_CONFIG when no directory is given; a flag or DIR wins over it", () => {
    expect(runCli(["check"], { SLUICE_CONFIG: good })).toEqual({ code: 0, stdout: summary, stderr: "" });
    expect(runCli(["check", "--config", good], { SLUICE_CONFIG: "/nonexistent" }).code).toBe(0);
    expect(runCli(["check", good], { SLUICE_CONFIG: "/nonexistent" }).code).toBe(0);
  });

  it("the reference's RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, as serve reads it", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-runtime-"));
    fs.mkdirSync(path.join(root, "rl", "config"), { recursive: true });
    fs.writeFileSync(path.join(root, "rl", "config", "g.yaml"), GOOD_RULE);
    expect(runCli(["check"], { RUNTIME_ROOT: root, RUNTIME_SUBDIRECTORY: "rl" })).toEqual({ code: 0, stdout: summary, stderr: "" });
  });
});

describe("an empty or missing rule directory is refused unless allowed", () => {
  it("check and explain: exit 1 naming the directory and the opt-in; exit 0 with --allow-empty-rules or SLUICE_ALLOW_EMPTY_RULES", () => {
    const empty = ruleDir({ "README.md": "rules go here\n" });
    const missing = path.join(empty, "no-such-dir");
    const refusals = {
      [empty]: `${empty}: (top): no rule files (*.yaml, *.yml) in this rule directory: sluice would enforce no limits; ${OPT_IN}\n`,
      [missing]: `${missing}: (top): the rule directory does not exist; ${OPT_IN}\n`,
    };
    for (const [dir, refusal] of Object.entries(refusals)) {
      expect(runCli(["check", dir]), dir).toEqual({ code: 1, stdout: "", stderr: refusal });
      const explain = ["explain", "--config", dir, "--domain", "d", "--descriptor", "k=v"];
      expect(runCli(explain), dir).toEqual({ code: 1, stdout: "", stderr: refusal });
      expect(runCli(["check", dir, "--allow-empty-rules"]).code, dir).toBe(0);
      expect(runCli(["check", dir], { SLUICE_ALLOW_EMPTY_RULES: "true" }).stdout, dir).toBe("ok\n");
      expect(runCli([...explain, "--allow-empty-rules"]).code, dir).toBe(0);
    }
    const typo = runCli(["check", empty], { SLUICE_ALLOW_EMPTY_RULES: "ture" });
    expect([typo.code, typo.stderr.split("\n")[0]]).toEqual([
      2,
      "sluice: SLUICE_ALLOW_EMPTY_RULES must be true or false (or 1/0, t/f, yes/no, on/off), got 'ture'",
    ]);
  });

  it("serve: exit 1 with the refusal as an `invalid rule` line", () => {
    const empty = ruleDir({});
    const r = runCli(["serve", "--config", empty, "--port", "0", "--admin-port", "0"]);
    expect(r.code).toBe(1);
    const first = JSON.parse(r.stdout.split("\n")[0]);
    expect([first.msg, first.file, first.error]).toEqual([
      "invalid rule",
      empty,
      `${empty}: (top): no rule files (*.yaml, *.yml) in this rule directory: sluice would enforce no limits; ${OPT_IN}`,
    ]);
  });

  it("serve --allow-empty-rules on a missing directory: serves no limits, then loads the rules once the directory appears", async () => {
    const dir = path.join(ruleDir({}), "later");
    const s = await startSluice(["--config", dir, "--allow-empty-rules"]);
    try {
      expect((await s.waitForLog((l) => l.level === 40 && l.dir === dir)).msg).toBe(`rule directory ${dir} does not exist: no limits until it does`);
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, "g.yaml"), GOOD_RULE);
      expect((await s.waitForLog((l) => l.msg === "rules reloaded")).domains).toEqual({ d: 1 });
    } finally {
      await s.stop();
    }
  });

  it("a reference environment: the empty RUNTIME_ROOT directory is refused; FORCE_START_WITHOUT_INITIAL_CONFIG=true starts", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-runtime-"));
    fs.mkdirSync(path.join(root, "rl", "config"), { recursive: true });
    const env = { RUNTIME_ROOT: root, RUNTIME_SUBDIRECTORY: "rl", USE_STATSD: "false" };
    const refused = runCli(["serve", "--port", "0", "--admin-port", "0"], env);
    expect(refused.code).toBe(1);
    const invalid = refused.stdout
      .split("\n")
      .filter((l) => l.includes('"msg":"invalid rule"'))
      .map((l) => JSON.parse(l));
    expect(
      invalid.map((l) => [l.file, l.error.endsWith(`${OPT_IN}; FORCE_START_WITHOUT_INITIAL_CONFIG=true starts too`)]),
      refused.stdout,
    ).toEqual([[path.join(root, "rl", "config"), true]]);
    const s = await startSluice([], { ...env, FORCE_START_WITHOUT_INITIAL_CONFIG: "true" });
    try {
      await s.waitForLog((l) => /^serving with no rules until valid rules arrive/.test(l.msg));
    } finally {
      await s.stop();
    }
  });
});

describe("sluice check", () => {
  it("prints ok and one summary line per domain for the shipped config", () => {
    const r = runCli(["check", "config"]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n")[0]).toBe("ok");
    expect(r.stdout).toMatch(/^domain edge: \d+ limits from edge\.yaml$/m);
  });

  it("checks ./config when no directory is given", () => {
    const r = runCli(["check"]);
    expect(r.code).toBe(0);
    expect(r.stdout.startsWith("ok\n")).toBe(true);
  });

  it("prints every error as FILE:LINE: path: message and exits 1", () => {
    const dir = ruleDir({
      "a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: foo\n      requests_per_unit: 1\n  - key: j\n    ratelimit: {}\n",
    });
    const r = runCli(["check", dir]);
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split("\n");
    expect(lines.length).toBe(2);
    expect(lines[0]).toMatch(/a\.yaml:5: d\.k: .*invalid rate limit unit 'foo'/);
    expect(lines[1]).toMatch(/a\.yaml:8: d\.j: .*unknown key 'ratelimit'/);
  });

  it("a missing directory is an error", () => {
    const r = runCli(["check", "/nonexistent/sluice-rules"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/nonexistent/);
  });

  it("usage errors exit 2", () => {
    expect(runCli(["frobnicate"]).code).toBe(2);
    expect(runCli(["serve", "--no-such-flag"]).code).toBe(2);
    expect(runCli(["serve", "--port", "seventy"]).code).toBe(2);
    expect(runCli([]).code).toBe(2);
  });

  it("a mistyped yes/no or closed-set value exits 2 naming the variable, in check as in serve", () => {
    const dir = ruleDir({ "good.yaml": GOOD_RULE });
    const yesNo = "must be true or false (or 1/0, t/f, yes/no, on/off)";
    const firstLine = (r: { code: number | null; stderr: string }) => [r.code, r.stderr.split("\n")[0]];
    expect(firstLine(runCli(["check", dir], { SLUICE_MERGE_DOMAINS: "ture" }))).toEqual([2, `sluice: SLUICE_MERGE_DOMAINS ${yesNo}, got 'ture'`]);
    const serve = ["serve", "--config", dir, "--port", "0", "--admin-port", "0"];
    expect(firstLine(runCli(serve, { SLUICE_MERGE_DOMAINS: "ture" }))).toEqual([2, `sluice: SLUICE_MERGE_DOMAINS ${yesNo}, got 'ture'`]);
    expect(firstLine(runCli(serve, { SLUICE_RESPONSE_HEADERS: "yes!" }))).toEqual([2, `sluice: SLUICE_RESPONSE_HEADERS ${yesNo}, got 'yes!'`]);
    expect(firstLine(runCli(["check", dir], { SLUICE_FAILURE_MODE: "open" }))).toEqual([
      2,
      "sluice: SLUICE_FAILURE_MODE must be one of allow, deny, local, error, got 'open'",
    ]);
    // The reference's spellings, and sluice's own.
    for (const v of ["T", "True", "1", "yes", "on"]) expect(runCli(["check", dir], { SLUICE_MERGE_DOMAINS: v }).code, v).toBe(0);
  });
});

describe("sluice serve", () => {
  it("exits 1 on a bad rule file, with the reload's `invalid rule` log lines naming file and line", () => {
    const dir = ruleDir({ "bad.yaml": BAD_RULE });
    const file = path.join(dir, "bad.yaml");
    const r = runCli(["serve", "--config", dir, "--port", "0", "--admin-port", "0"]);
    expect([r.code, r.stderr]).toEqual([1, ""]);
    const lines = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .map(({ time, ...rest }) => rest);
    expect(lines).toEqual([
      { level: 50, service: "sluice", msg: "invalid rule", file, line: 5, path: "d.k", error: `${file}:5: d.k: invalid rate limit unit 'fortnight'` },
      { level: 50, service: "sluice", msg: "rules failed to load", dir, errors: 1 },
    ]);
  });

  it("the same lines as text with SLUICE_LOG_FORMAT=text, and by default on a terminal", () => {
    const dir = ruleDir({ "bad.yaml": BAD_RULE });
    const file = path.join(dir, "bad.yaml");
    const line = `level=error msg="invalid rule" service=sluice file=${file} line=5 path=d.k error="${file}:5: d.k: invalid rate limit unit 'fortnight'"`;
    const r = runCli(["serve", "--config", dir, "--port", "0", "--admin-port", "0"], { SLUICE_LOG_FORMAT: "text" });
    expect(r.code).toBe(1);
    expect(r.stdout.split("\n")[0].replace(/^time="[^"]+" /, "")).toBe(line);
    // script(1) gives sluice a terminal as stdout.
    const tty = spawnSync("script", ["-qec", `${process.execPath} ${MAIN} serve --config ${dir} --port 0 --admin-port 0`, "/dev/null"], {
      cwd: ROOT,
      env: { ...process.env, SLUICE_LOG_FORMAT: "" },
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(tty.status).toBe(1);
    expect(tty.stdout.split(/\r?\n/)[0].replace(/^time="[^"]+" /, "")).toBe(line);
  });

  it("logs a JSON listening line with the port, after the rules are loaded", async () => {
    const s = await startSluice(["--config", path.join(ROOT, "config")]);
    const lines = s.logs.map((l) => JSON.parse(l));
    const loaded = lines.findIndex((l) => l.msg === "rules loaded");
    const listening = lines.findIndex((l) => l.msg === "listening");
    expect(loaded).toBeGreaterThanOrEqual(0);
    expect(listening).toBeGreaterThan(loaded);
    expect(lines[listening].port).toBe(s.port);
    expect(lines.some((l) => /single-instance/.test(l.msg))).toBe(true);
    expect(await s.stop()).toBe(0);
  });

  it("flags win over environment variables", async () => {
    const s = await startSluice(["--config", path.join(ROOT, "config")], { SLUICE_CONFIG: "/nonexistent" });
    expect(s.port).toBeGreaterThan(0);
    expect(await s.stop()).toBe(0);
  });

  it("loads the reference's duplicate-domain pair only with --merge-domains", () => {
    const dir = ruleDir({
      "one.yaml": "domain: test-domain\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
      "two.yaml": "domain: test-domain\ndescriptors:\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
    });
    const plain = runCli(["check", dir]);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/duplicate domain 'test-domain'/);
    expect(plain.stderr).toMatch(/one\.yaml/);
    const merged = runCli(["check", dir, "--merge-domains"]);
    expect(merged.code).toBe(0);
    expect(merged.stdout).toMatch(/domain test-domain: 2 limits/);
  });

  it("every reference fixture that the reference rejects, check rejects", () => {
    for (const f of [
      "bad_limit_unit",
      "bad_yaml",
      "empty_domain",
      "empty_key",
      "duplicate_key",
      "misspelled_key",
      "misspelled_key2",
      "non_map_list",
      "non_string_key",
      "replaces_empty",
      "replaces_self",
      "unlimited_with_unit",
    ]) {
      const dir = ruleDir({ [`${f}.yaml`]: require_fixture(f) });
      const r = runCli(["check", dir]);
      expect(r.code, f).toBe(1);
      expect(r.stderr, f).toMatch(new RegExp(`${f}\\.yaml:\\d+: `));
    }
  });
});

function require_fixture(name: string): string {
  return fs.readFileSync(path.join(COMPAT, `${name}.yaml`), "utf8");
}

describe("a port already taken", () => {
  /** The error line of a start that failed (exit 1, nothing on stderr, no stack anywhere). */
  const failedStart = (args: string[], env: Record<string, string>) => {
    const r = runCli(["serve", ...args], { SLUICE_LOG_FORMAT: "json", ...env });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("");
    expect(r.stdout).not.toMatch(/\bat .*\.js:\d+/); // no stack trace
    return r.stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((l) => l.level === 50);
  };

  it("stops serve with exit 1 and one line naming the port and the flag or variable that moves it", async () => {
    const net = await import("node:net");
    const held = net.createServer();
    await new Promise<void>((resolve) => held.listen(0, "127.0.0.1", resolve));
    const port = (held.address() as import("node:net").AddressInfo).port;
    try {
      const used = `another process already listens there`;
      for (const [args, env, what, setting] of [
        [["--host", "127.0.0.1", "--port", String(port), "--admin-port", "0"], {}, "the gRPC port", "--port"],
        [["--host", "127.0.0.1", "--admin-port", "0"], { SLUICE_PORT: String(port) }, "the gRPC port", "SLUICE_PORT or --port"],
        [["--port", "0", "--admin-port", String(port)], {}, "sluice's admin port", "--admin-port"],
        [["--port", "0"], { SLUICE_ADMIN_PORT: String(port) }, "sluice's admin port", "SLUICE_ADMIN_PORT or --admin-port"],
      ] as const) {
        const line = failedStart([...args], env);
        expect(line, setting).toMatchObject({ port, setting, code: "EADDRINUSE" });
        expect(line.msg, setting).toBe(`cannot listen on 127.0.0.1:${port} for ${what}: ${used}; set ${setting} to a free port (0 picks one)`);
        expect(line.err, setting).toBeUndefined(); // the system's text is `detail`, no error object with its stack
        expect(line.detail, setting).toContain("EADDRINUSE");
      }
    } finally {
      held.close();
    }
  });

  it("under the reference's environment names PORT, DEBUG_PORT or GRPC_PORT", async () => {
    const net = await import("node:net");
    const held = net.createServer();
    await new Promise<void>((resolve) => held.listen(0, "127.0.0.1", resolve));
    const port = (held.address() as import("node:net").AddressInfo).port;
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-refports-"));
    fs.mkdirSync(path.join(root, "rl/config"), { recursive: true });
    fs.writeFileSync(
      path.join(root, "rl/config/web.yaml"),
      "domain: web\ndescriptors:\n  - key: client\n    rate_limit: { unit: hour, requests_per_unit: 3 }\n",
    );
    const base = {
      RUNTIME_ROOT: root,
      RUNTIME_SUBDIRECTORY: "rl",
      USE_STATSD: "false",
      SLUICE_ADMIN_PORT: "0",
      HOST: "127.0.0.1",
      DEBUG_HOST: "127.0.0.1",
      GRPC_HOST: "127.0.0.1",
    };
    try {
      for (const [env, what, setting] of [
        [{ PORT: String(port), DEBUG_PORT: "0", GRPC_PORT: "0" }, "the reference's HTTP port (/healthcheck, /json)", "PORT"],
        [{ PORT: "0", DEBUG_PORT: String(port), GRPC_PORT: "0" }, "the reference's debug port (/rlconfig, /stats)", "DEBUG_PORT"],
        [{ PORT: "0", DEBUG_PORT: "0", GRPC_PORT: String(port) }, "the gRPC port", "GRPC_PORT, --port or SLUICE_PORT"],
      ] as const) {
        const line = failedStart([], { ...base, ...env });
        expect(line.msg, setting).toBe(
          `cannot listen on 127.0.0.1:${port} for ${what}: another process already listens there; set ${setting} to a free port (0 picks one)`,
        );
        expect(line, setting).toMatchObject({ port, setting, code: "EADDRINUSE" });
      }
    } finally {
      held.close();
    }
  });
});
