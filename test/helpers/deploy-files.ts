// What the deployment files say, read from the files themselves, for tests that cross-check them with sluice's
// settings: the Dockerfile's runtime stage, the flag table of docs/configuration.md, the Kubernetes manifests.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { ROOT } from "./sluice.js";

export const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");

/** The Dockerfile's instructions, continuation lines joined, comments dropped. */
export function dockerfileLines(): string[] {
  return read("Dockerfile")
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
}

/** The runtime (last) stage's ENV values: what every container of the image starts with. */
export function imageEnv(): Record<string, string> {
  const lines = dockerfileLines();
  const last = lines.findLastIndex((l) => l.startsWith("FROM "));
  const env: Record<string, string> = {};
  for (const l of lines.slice(last)) {
    const m = /^ENV (\w+)=(\S+)$/.exec(l);
    if (m) env[m[1]] = m[2];
  }
  return env;
}

/** The HEALTHCHECK's options and its exec-form command. */
export function imageHealthcheck(): { options: Record<string, string>; command: string[] } {
  const line = dockerfileLines().find((l) => l.startsWith("HEALTHCHECK "));
  if (!line) throw new Error("Dockerfile has no HEALTHCHECK");
  const m = /^HEALTHCHECK((?: --[a-z-]+=\S+)*) CMD (\[.*\])$/.exec(line);
  if (!m) throw new Error(`HEALTHCHECK is not options + exec-form CMD: ${line}`);
  const options = Object.fromEntries([...m[1].matchAll(/--([a-z-]+)=(\S+)/g)].map((o) => [o[1], o[2]]));
  return { options, command: JSON.parse(m[2]) };
}

/** Cells of docs/configuration.md's flag table (`| flag | commands | environment | default | meaning |`). */
function flagTableRows(): string[][] {
  const lines = read("docs/configuration.md").split("\n");
  const start = lines.findIndex((l) => /^\|\s*flag\s*\|\s*commands\s*\|\s*environment\s*\|/.test(l));
  if (start < 0) throw new Error("docs/configuration.md has no flag table");
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(
      line
        .split("|")
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

/** Every SLUICE_* variable the flag table of docs/configuration.md names (test/unit/docs-configuration.test.ts holds it to the code). */
export function documentedVariables(): Set<string> {
  return new Set(flagTableRows().flatMap((cells) => [...cells[2].matchAll(/`(SLUICE_[A-Z0-9_]+)`/g)].map((m) => m[1])));
}

/** The admin port's paths, as the flag table's `--admin-port` row lists them. */
export function adminPaths(): string[] {
  const row = flagTableRows().find((cells) => cells[0].startsWith("`--admin-port"));
  if (!row) throw new Error("docs/configuration.md flag table has no --admin-port row");
  return [...row[4].matchAll(/`(\/[a-z]+)`/g)].map((m) => m[1]);
}

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; labels?: Record<string, string> }; [field: string]: any };

export const KUBERNETES_DIR = "deploy/kubernetes";

/** The kustomizations: deploy/kubernetes and its monitoring/ (the Prometheus Operator's objects). */
export const KUSTOMIZATIONS = [KUBERNETES_DIR, `${KUBERNETES_DIR}/monitoring`];

/** Files a kustomization lists, relative to the repository. */
export function kustomizationResources(dir: string): string[] {
  const k = parse(read(`${dir}/kustomization.yaml`));
  return (k.resources as string[]).map((r) => path.posix.join(dir, r));
}

/** Every YAML file in the kustomizations' directories, kustomization.yaml aside. */
export function manifestFiles(): string[] {
  return KUSTOMIZATIONS.flatMap((dir) =>
    readdirSync(path.join(ROOT, dir))
      .filter((f) => /\.ya?ml$/.test(f) && f !== "kustomization.yaml")
      .map((f) => `${dir}/${f}`),
  );
}

/** The objects of one manifest file (several documents allowed); a YAML error throws. */
export function manifestObjects(file: string): K8sObject[] {
  return parseAllDocuments(read(file)).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0].message}`);
    return doc.toJSON() as K8sObject;
  });
}
