// RuleWatcher on a real temporary directory: what counts as a change, and surviving the directory going away.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { LoadResult } from "../../src/rules/load.js";
import { ruleCounts, RuleWatcher, statSignature } from "../../src/rules/watch.js";
import { until } from "../helpers/wait.js";

/** A rule file with n limits: the count tells versions apart. */
const yaml = (n: number) =>
  "domain: w\ndescriptors:\n" + Array.from({ length: n }, (_, i) => `  - key: k${i}\n    rate_limit: {unit: second, requests_per_unit: 1}\n`).join("");

const watchers: RuleWatcher[] = [];
afterEach(() => {
  for (const w of watchers.splice(0)) w.close();
});

function setup(files: Record<string, string>, intervalMs = 0) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-watch-"));
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
  const results: LoadResult[] = [];
  const logs: { msg: string }[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  const w = new RuleWatcher({ dir, load: { mergeDomains: false }, intervalMs, logger: pino({ level: "info" }, sink), onLoad: (r) => results.push(r) });
  watchers.push(w);
  return { dir, w, results, logs };
}

const limitOf = (r: LoadResult) => (r.rules ? ruleCounts(r.rules).w : undefined);

describe("statSignature", () => {
  it("covers the rule files' names and stat only, as loadRuleDir selects them", () => {
    const { dir } = setup({ "a.yaml": yaml(1) });
    const before = statSignature(dir);
    fs.writeFileSync(path.join(dir, "notes.txt"), "x");
    fs.writeFileSync(path.join(dir, ".hidden.yaml"), "x");
    fs.mkdirSync(path.join(dir, "sub.yaml"));
    expect(statSignature(dir)).toBe(before);
    fs.writeFileSync(path.join(dir, "a.yaml"), yaml(2));
    expect(statSignature(dir)).not.toBe(before);
    const edited = statSignature(dir);
    fs.renameSync(path.join(dir, "a.yaml"), path.join(dir, "b.yaml"));
    expect(statSignature(dir)).not.toBe(edited);
    expect(statSignature(path.join(dir, "missing"))).toBe("unreadable:ENOENT");
  });
});

describe("RuleWatcher", () => {
  it("an unchanged directory is no change, nor a file rewritten with the same text: check() neither calls back nor logs", async () => {
    const { dir, w, results, logs } = setup({ "a.yaml": yaml(1) });
    expect(limitOf(await w.load())).toBe(1);
    w.start();
    await w.check();
    fs.writeFileSync(path.join(dir, "a.yaml"), yaml(1));
    await w.check();
    expect(results).toEqual([]);
    expect(logs).toEqual([]);
  });

  it("a burst of writes is seen through the watch and loaded once, with the final text", async () => {
    const { dir, w, results } = setup({ "a.yaml": yaml(1) });
    await w.load();
    w.start();
    await w.check();
    for (let n = 2; n <= 6; n++) fs.writeFileSync(path.join(dir, "a.yaml"), yaml(n));
    await until(() => results.length > 0, 5000, "a reload");
    await w.check(); // anything still pending finds nothing new
    expect(results.map(limitOf)).toEqual([6]);
    expect(w.state()).toMatchObject({ watching: true, reloads: 1, errors: 0 });
  });

  it("a change made between load() and start() is not missed", async () => {
    const { dir, w, results } = setup({ "a.yaml": yaml(1) });
    await w.load();
    fs.writeFileSync(path.join(dir, "a.yaml"), yaml(2));
    w.start();
    await w.check();
    expect(results.map(limitOf)).toEqual([2]);
  });

  it("invalid content is reported once with its errors; fixing it reloads", async () => {
    const { dir, w, results } = setup({ "a.yaml": yaml(1) });
    await w.load();
    w.start();
    await w.check();
    fs.writeFileSync(path.join(dir, "a.yaml"), yaml(1).replace("second", "fortnight"));
    await w.check();
    await w.check();
    expect(results).toHaveLength(1);
    expect(results[0].rules).toBeUndefined();
    expect(results[0].errors.map((e) => [path.basename(e.file), e.line])).toEqual([["a.yaml", 4]]);
    expect(w.state()).toMatchObject({ reloads: 0, errors: 1 });
    fs.writeFileSync(path.join(dir, "a.yaml"), yaml(3));
    await w.check();
    expect(results.map(limitOf)).toEqual([undefined, 3]);
    expect(w.state()).toMatchObject({ reloads: 1, errors: 0 });
  });

  it("survives the directory disappearing and coming back: reports it, logs the lost watch once, watches again", async () => {
    const { dir, w, results, logs } = setup({ "a.yaml": yaml(1) });
    await w.load();
    w.start();
    fs.rmSync(dir, { recursive: true });
    await until(() => results.length === 1, 5000, "the loss reported");
    expect(results[0].errors[0].message).toMatch(/^cannot read rule directory/);
    expect(w.state().watching).toBe(false);

    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, "a.yaml"), yaml(9));
    await until(() => results.length === 2, 5000, "the directory back");
    expect(limitOf(results[1])).toBe(9);
    expect(w.state().watching).toBe(true);
    expect(logs.filter((l) => l.msg.startsWith("rule directory not watched"))).toHaveLength(1);

    // The new directory is the one watched now.
    fs.writeFileSync(path.join(dir, "a.yaml"), yaml(10));
    await until(() => results.length === 3, 5000, "an edit in the new directory");
    expect(limitOf(results[2])).toBe(10);
  });

  it("prepare runs on each changed domain before onLoad, one step per event-loop turn; a kept domain is not prepared again", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-watch-"));
    fs.writeFileSync(path.join(dir, "a.yaml"), yaml(1).replace("domain: w", "domain: a"));
    fs.writeFileSync(path.join(dir, "b.yaml"), yaml(2).replace("domain: w", "domain: b"));
    const steps: string[] = [];
    let turned = true;
    const results: LoadResult[] = [];
    const w = new RuleWatcher({
      dir,
      load: { mergeDomains: false },
      intervalMs: 0,
      logger: pino({ level: "silent" }),
      prepare: function* (d) {
        for (let i = 0; i < 3; i++) {
          // The event loop ran between this step and the last one.
          steps.push(`${d.domain}${i}${turned ? "" : " (same turn)"}`);
          turned = false;
          setImmediate(() => (turned = true));
          yield;
        }
      },
      onLoad: (r) => {
        steps.push("onLoad");
        results.push(r);
      },
    });
    watchers.push(w);
    await w.load();
    expect(steps.sort()).toEqual(["a0", "a1", "a2", "b0", "b1", "b2"]);
    steps.length = 0;
    w.start();
    await w.check();
    fs.writeFileSync(path.join(dir, "b.yaml"), yaml(3).replace("domain: w", "domain: b"));
    await until(() => results.length > 0, 5000, "a reload");
    expect(steps).toEqual(["b0", "b1", "b2", "onLoad"]);
  });

  it("close() stops watching", async () => {
    const { dir, w, results } = setup({ "a.yaml": yaml(1) }, 1000);
    await w.load();
    w.start();
    w.close();
    fs.writeFileSync(path.join(dir, "a.yaml"), yaml(2));
    await w.check();
    expect(results).toEqual([]);
  });
});

describe("ruleCounts", () => {
  it("counts limits per domain", async () => {
    const { dir, w } = setup({ "a.yaml": yaml(1) });
    expect(ruleCounts((await w.load()).rules!)).toEqual({ w: 1 });
    fs.writeFileSync(path.join(dir, "b.yaml"), yaml(3).replace("domain: w", "domain: v"));
    expect(ruleCounts((await w.load()).rules!)).toEqual({ v: 3, w: 1 });
  });
});
