// Files the reference would load from its runtime directory and sluice does not. The reference (through
// lyft/goruntime) reads every file under RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, in subdirectories
// too, whatever its name, dot-files included unless RUNTIME_IGNOREDOTFILES=true; sluice reads the
// top-level *.yaml and *.yml files and never a dot-file. Reported at start so no rule goes missing
// unseen.
import fs from "node:fs";
import path from "node:path";

/** Enough to name the problem; a directory this large is not a rule directory. */
const MAX_ENTRIES = 10_000;
const MAX_DEPTH = 8;

/** Paths (relative to dir) of files the reference would load as rule files and sluice skips; [] if none or dir is unreadable. */
export function filesOnlyTheReferenceLoads(dir: string, ignoreDotFiles: boolean): string[] {
  const out: string[] = [];
  let seen = 0;
  const walk = (rel: string, depth: number) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(path.join(dir, rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (++seen > MAX_ENTRIES) return;
      const name = path.join(rel, e.name);
      const dot = e.name.startsWith(".");
      if (dot && ignoreDotFiles) continue;
      if (e.isDirectory()) {
        if (depth < MAX_DEPTH) walk(name, depth + 1);
        continue;
      }
      const regular = e.isFile() || (e.isSymbolicLink() && isFile(path.join(dir, name)));
      if (!regular) continue;
      const sluiceLoads = depth === 0 && !dot && /\.ya?ml$/.test(e.name);
      if (!sluiceLoads) out.push(name);
    }
  };
  walk("", 0);
  return out;
}

function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}
