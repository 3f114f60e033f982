// Hot reload of real `sluice serve` processes on real Redis: edits, invalid edits, a Kubernetes
// ConfigMap swap, and the periodic re-read for changes no directory event shows.
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { descriptor, OK, rlsClient, type RlsClient, type WireResponse } from "../helpers/grpc-client.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

const rules = (domain: string, editLimit: number, extra = "") => `domain: ${domain}
descriptors:
  - key: keep
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: token_bucket}
  - key: edit
    rate_limit: {unit: hour, requests_per_unit: ${editLimit}}
${extra}`;

let redis: RedisProcess;
const sluices: SluiceProcess[] = [];
const clients: RlsClient[] = [];

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  for (const c of clients) c.close();
  for (const s of sluices) await s.stop();
  await redis?.stop();
});

/** A sluice whose only way to see changes is the directory watch, unless env says otherwise. */
async function sluiceOn(dir: string, env: Record<string, string> = { SLUICE_RELOAD_INTERVAL_S: "0" }) {
  const s = await startSluice(["--config", dir, "--redis", redis.url], env);
  sluices.push(s);
  const c = rlsClient(s.port);
  clients.push(c);
  return { s, c };
}

/** The limit a descriptor gets now, checked without consuming (hits_addend 0). */
async function limitOf(c: RlsClient, domain: string, entries: Record<string, string>): Promise<number | undefined> {
  const r: WireResponse = await c.shouldRateLimit({ domain, descriptors: [descriptor(entries, { hits_addend: { value: 0 } })] });
  return r.statuses[0].current_limit?.requests_per_unit;
}

async function readyz(s: SluiceProcess) {
  const res = await fetch(`http://127.0.0.1:${s.adminPort}/readyz`);
  return { status: res.status, body: await res.json() };
}

describe("a plain rule directory", () => {
  let dir: string;
  let file: string;
  let s: SluiceProcess;
  let c: RlsClient;

  beforeAll(async () => {
    dir = ruleDir({ "reload.yaml": rules("reload", 10) });
    file = path.join(dir, "reload.yaml");
    ({ s, c } = await sluiceOn(dir));
  });

  it("a valid edit takes effect within the watch latency, and counters of unchanged rules go on", async () => {
    const keep = () => c.shouldRateLimit({ domain: "reload", descriptors: [descriptor({ keep: "k1" })] });
    expect((await keep()).statuses[0].limit_remaining).toBe(4);
    expect((await keep()).statuses[0].limit_remaining).toBe(3);
    expect(await limitOf(c, "reload", { edit: "e" })).toBe(10);

    fs.writeFileSync(file, rules("reload", 20, "  - key: added\n    rate_limit: {unit: minute, requests_per_unit: 7}\n"));
    await until(async () => (await limitOf(c, "reload", { edit: "e" })) === 20, 5000, "the edited limit serves", 25);
    expect(await limitOf(c, "reload", { added: "a" })).toBe(7);

    // The same Redis counter as before the reload: 5 - 2 - 1.
    const after = await keep();
    expect(after.overall_code).toBe(OK);
    expect(after.statuses[0].limit_remaining).toBe(2);

    const reloaded = await s.waitForLog((l) => l.msg === "rules reloaded");
    expect(reloaded.domains).toEqual({ reload: 3 });
    const r = await readyz(s);
    expect(r.status).toBe(200);
    expect(r.body.rules).toMatchObject({ domains: { reload: 3 }, reloads: 1, errors: 0, watching: true });
  });

  it("an invalid edit leaves the last good rules serving and reports each error with file and line", async () => {
    const bad = rules("reload", 30).replace("unit: hour, requests_per_unit: 30", "unit: fortnight, requests_per_unit: 30");
    const badLine = bad.split("\n").findIndex((l) => l.includes("fortnight")) + 1;
    fs.writeFileSync(file, bad);

    const err = await s.waitForLog((l) => l.msg === "invalid rule");
    expect(err).toMatchObject({ level: 50, file, line: badLine, path: "reload.edit" });
    expect(err.error).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:${badLine}: reload\\.edit: .*fortnight`));
    const summary = await s.waitForLog((l) => l.msg.startsWith("rules not reloaded"));
    expect(summary.errors).toBe(1);

    expect(await limitOf(c, "reload", { edit: "e" })).toBe(20);
    expect(await limitOf(c, "reload", { added: "a" })).toBe(7);
    const r = await readyz(s);
    expect(r.status).toBe(200);
    expect(r.body.rules).toMatchObject({ domains: { reload: 3 }, reloads: 1, errors: 1 });

    fs.writeFileSync(file, rules("reload", 40));
    await until(async () => (await limitOf(c, "reload", { edit: "e" })) === 40, 5000, "the fixed file serves", 25);
    expect((await readyz(s)).body.rules).toMatchObject({ domains: { reload: 2 }, reloads: 2, errors: 0 });
  });
});

describe("a Kubernetes ConfigMap volume", () => {
  /** The kubelet's layout: data in a timestamped dot-directory, `..data` pointing at it, files linked through `..data`. */
  function version(dir: string, name: string, text: string) {
    fs.mkdirSync(path.join(dir, name));
    fs.writeFileSync(path.join(dir, name, "cm.yaml"), text);
  }

  it("the atomic swap of ..data is picked up", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cm-"));
    version(dir, "..2026_12_03_12_00_00.000000001", rules("cm", 10));
    fs.symlinkSync("..2026_12_03_12_00_00.000000001", path.join(dir, "..data"));
    fs.symlinkSync("..data/cm.yaml", path.join(dir, "cm.yaml"));
    const { c } = await sluiceOn(dir);
    expect(await limitOf(c, "cm", { edit: "e" })).toBe(10);

    // What the kubelet does on an update: new version, a temporary link, rename over ..data, old version removed.
    version(dir, "..2026_12_03_12_05_00.000000002", rules("cm", 11));
    fs.symlinkSync("..2026_12_03_12_05_00.000000002", path.join(dir, "..data_tmp"));
    fs.renameSync(path.join(dir, "..data_tmp"), path.join(dir, "..data"));
    fs.rmSync(path.join(dir, "..2026_12_03_12_00_00.000000001"), { recursive: true });

    await until(async () => (await limitOf(c, "cm", { edit: "e" })) === 11, 5000, "the swapped-in version serves", 25);
  });
});

describe("the periodic re-read", () => {
  it("finds a change no directory event shows (a rule file linked from elsewhere, edited in place)", async () => {
    const elsewhere = ruleDir({ "p.yaml": rules("periodic", 10) });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-linked-"));
    fs.symlinkSync(path.join(elsewhere, "p.yaml"), path.join(dir, "p.yaml"));
    const { c } = await sluiceOn(dir, { SLUICE_RELOAD_INTERVAL_S: "1" });
    expect(await limitOf(c, "periodic", { edit: "e" })).toBe(10);

    fs.writeFileSync(path.join(elsewhere, "p.yaml"), rules("periodic", 12));
    await until(async () => (await limitOf(c, "periodic", { edit: "e" })) === 12, 5000, "the re-read picks up the edit", 25);
  });
});

describe("a rule directory emptied while serving", () => {
  it("keeps the last good rules (an error, as an invalid edit) unless --allow-empty-rules, which applies it", async () => {
    const guarded = ruleDir({ "reload.yaml": rules("emptied", 10) });
    const allowed = ruleDir({ "reload.yaml": rules("emptied", 10) });
    const { s, c } = await sluiceOn(guarded);
    const open = await sluiceOn(allowed, { SLUICE_RELOAD_INTERVAL_S: "0", SLUICE_ALLOW_EMPTY_RULES: "true" });
    fs.rmSync(path.join(guarded, "reload.yaml"));
    fs.rmSync(path.join(allowed, "reload.yaml"));

    const err = await s.waitForLog((l) => l.msg === "invalid rule");
    expect(err.error).toBe(
      `${guarded}: (top): no rule files (*.yaml, *.yml) in this rule directory: sluice would enforce no limits; to start with no limits until rule files appear, give --allow-empty-rules (or SLUICE_ALLOW_EMPTY_RULES=true)`,
    );
    expect((await s.waitForLog((l) => l.msg.startsWith("rules not reloaded"))).errors).toBe(1);
    expect(await limitOf(c, "emptied", { edit: "e" })).toBe(10);
    expect((await readyz(s)).body.rules).toMatchObject({ domains: { emptied: 2 }, reloads: 0, errors: 1 });

    await open.s.waitForLog((l) => l.msg === "rules reloaded");
    expect(await limitOf(open.c, "emptied", { edit: "e" })).toBeUndefined();
    expect((await readyz(open.s)).body.rules).toMatchObject({ domains: {}, reloads: 1, errors: 0 });
  });
});
