// The bake-off's candidate transports: bench/transports/<name>.mjs, each exporting `name` and `start`
// (a StartTransport, src/server/transport.ts) and, when it cannot run here, `unavailable` (why).
// The same modules are what the conformance suite loads through SLUICE_CONFORMANCE_MODULE.
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));

export const CANDIDATES = ["grpc-js", "grpc-js-static", "connect", "h2"];

/** The transport sluice ships: the others must beat it to replace it. */
export const INCUMBENT = "grpc-js";

export function candidatePath(name) {
  if (!CANDIDATES.includes(name)) throw new Error(`unknown transport '${name}' (known: ${CANDIDATES.join(", ")})`);
  return path.join(HERE, `${name}.mjs`);
}

/** { name, path, start?, unavailable? }: a module that fails to load is reported, not thrown. */
export async function loadCandidate(name) {
  const file = candidatePath(name);
  try {
    const mod = await import(pathToFileURL(file).href);
    if (mod.name !== name) return { name, path: file, unavailable: `${file} exports name '${mod.name}'` };
    if (mod.unavailable) return { name, path: file, unavailable: mod.unavailable };
    if (typeof mod.start !== "function") return { name, path: file, unavailable: `${file} exports no start function` };
    return { name, path: file, start: mod.start };
  } catch (err) {
    return { name, path: file, unavailable: `does not load: ${err.message}` };
  }
}
