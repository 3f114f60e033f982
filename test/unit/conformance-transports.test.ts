// Which transports the conformance suite (test/conformance/) judges: all registered by default, narrowed by
// SLUICE_CONFORMANCE_TRANSPORT, plus an out-of-tree module from SLUICE_CONFORMANCE_MODULE.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { selectedTransports, TRANSPORTS } from "../conformance/transports.js";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-conformance-modules-"));
function moduleFile(name: string, text: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

describe("transport selection", () => {
  it("registers h2; with no environment every registered transport is judged", async () => {
    expect(TRANSPORTS.map((t) => t.name)).toEqual(["h2"]);
    expect((await selectedTransports({})).map((t) => t.name)).toEqual(TRANSPORTS.map((t) => t.name));
  });

  it("SLUICE_CONFORMANCE_TRANSPORT narrows to the named ones; an unknown name is an error listing the known ones", async () => {
    expect((await selectedTransports({ SLUICE_CONFORMANCE_TRANSPORT: " h2 " })).map((t) => t.name)).toEqual(["h2"]);
    await expect(selectedTransports({ SLUICE_CONFORMANCE_TRANSPORT: "h2,nope" })).rejects.toThrow(
      `SLUICE_CONFORMANCE_TRANSPORT names nope; known transports: ${TRANSPORTS.map((t) => t.name).join(", ")}`,
    );
  });

  it("SLUICE_CONFORMANCE_MODULE adds a candidate module (name, start); it can be selected alone", async () => {
    const file = moduleFile("candidate.mjs", 'export const name = "outside";\nexport async function start() { throw new Error("not started here"); }\n');
    const all = await selectedTransports({ SLUICE_CONFORMANCE_MODULE: file });
    expect(all.map((t) => t.name)).toEqual([...TRANSPORTS.map((t) => t.name), "outside"]);
    const only = await selectedTransports({ SLUICE_CONFORMANCE_MODULE: file, SLUICE_CONFORMANCE_TRANSPORT: "outside" });
    expect(only.map((t) => t.name)).toEqual(["outside"]);
    expect(typeof only[0].start).toBe("function");
  });

  it("a module that is relative, lacks name or start, or reuses a registered name is refused with a clear error", async () => {
    await expect(selectedTransports({ SLUICE_CONFORMANCE_MODULE: "bench/transports/x.mjs" })).rejects.toThrow(
      "SLUICE_CONFORMANCE_MODULE must be an absolute path, got bench/transports/x.mjs",
    );
    const noStart = moduleFile("no-start.mjs", 'export const name = "half";\n');
    await expect(selectedTransports({ SLUICE_CONFORMANCE_MODULE: noStart })).rejects.toThrow(
      `${noStart} must export a non-empty string \`name\` and a function \`start\` (StartTransport)`,
    );
    const clash = moduleFile("clash.mjs", 'export const name = "h2";\nexport async function start() {}\n');
    await expect(selectedTransports({ SLUICE_CONFORMANCE_MODULE: clash })).rejects.toThrow(
      `${clash} exports name "h2", which a registered transport already uses`,
    );
  });
});
