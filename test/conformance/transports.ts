// The gRPC transports the conformance suite judges: sluice's one (h2/), and for experiments an
// out-of-tree candidate. The suite runs against every one of them unless narrowed:
//   SLUICE_CONFORMANCE_TRANSPORT=name[,name]   only these (registered or from the module below)
//   SLUICE_CONFORMANCE_MODULE=/abs/path.mjs    adds an out-of-tree candidate (exports `name`, `start`)
import path from "node:path";
import { pathToFileURL } from "node:url";
import { startH2Server } from "../../src/server/h2/server.js";
import type { StartTransport } from "../../src/server/grpc-contract.js";

export interface Candidate {
  name: string;
  start: StartTransport;
}

export const TRANSPORTS: Candidate[] = [{ name: "h2", start: startH2Server }];

/** The transports this run judges (env above); throws a clear error for a name or module that does not resolve. */
export async function selectedTransports(env: NodeJS.ProcessEnv = process.env): Promise<Candidate[]> {
  const candidates = [...TRANSPORTS];
  const modulePath = env.SLUICE_CONFORMANCE_MODULE?.trim();
  if (modulePath) candidates.push(await loadCandidate(modulePath));

  const wanted = (env.SLUICE_CONFORMANCE_TRANSPORT ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (wanted.length === 0) return candidates;
  const known = candidates.map((c) => c.name);
  const unknown = wanted.filter((w) => !known.includes(w));
  if (unknown.length > 0) {
    throw new Error(`SLUICE_CONFORMANCE_TRANSPORT names ${unknown.join(", ")}; known transports: ${known.join(", ")}`);
  }
  return candidates.filter((c) => wanted.includes(c.name));
}

async function loadCandidate(file: string): Promise<Candidate> {
  if (!path.isAbsolute(file)) throw new Error(`SLUICE_CONFORMANCE_MODULE must be an absolute path, got ${file}`);
  const mod = (await import(pathToFileURL(file).href)) as Partial<Candidate>;
  if (typeof mod.name !== "string" || mod.name === "" || typeof mod.start !== "function") {
    throw new Error(`${file} must export a non-empty string \`name\` and a function \`start\` (StartTransport)`);
  }
  if (TRANSPORTS.some((t) => t.name === mod.name)) {
    throw new Error(`${file} exports name "${mod.name}", which a registered transport already uses`);
  }
  return { name: mod.name, start: mod.start };
}
