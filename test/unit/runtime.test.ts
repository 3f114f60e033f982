// The Node runtime sluice needs and how it is started, kept in step across the files that say it:
// package.json (engines, @types/node, `npm start`), the bin's shebang, the Dockerfile, .ci/run.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { binNodeFlags, ROOT } from "../helpers/sluice.js";

const read = (f: string) => readFileSync(path.join(ROOT, f), "utf8");
const pkg = JSON.parse(read("package.json"));
const major = Number(/^>=(\d+)$/.exec(pkg.engines.node)?.[1]);

describe("Node version", () => {
  it("package.json requires Node 24 or newer, and types the API of that major", () => {
    expect(major).toBe(24);
    expect(pkg.devDependencies["@types/node"]).toMatch(new RegExp(`^\\^${major}\\.\\d+\\.\\d+$`));
  });

  it("the suite runs on it", () => {
    expect(Number(process.versions.node.split(".")[0])).toBeGreaterThanOrEqual(major);
  });

  it(".ci/run reads the same major from package.json", () => {
    const line = read(".ci/run")
      .split("\n")
      .find((l) => l.startsWith("node_major="))!;
    expect(execFileSync("bash", ["-c", `${line}; echo "$node_major"`], { cwd: ROOT, encoding: "utf8" }).trim()).toBe(String(major));
  });
});

describe("V8 flags sluice starts with", () => {
  const flags = binNodeFlags(path.join(ROOT, "src/bin.ts"));

  it("the bin bounds the young generation's semi-space at 16 MiB", () => {
    expect(flags).toEqual(["--max-semi-space-size=16"]);
  });

  it("npm start and the Docker image start it with the same flags", () => {
    expect(pkg.scripts.start).toBe(`node ${flags.join(" ")} dist/bin.js serve`);
    expect(read("Dockerfile").split("\n")).toContain(`ENV NODE_OPTIONS=${flags.join(" ")}`);
  });
});
