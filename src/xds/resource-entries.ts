// The resources of one xDS response as compile entries (rules/compile-job.ts): each named by its
// RateLimitConfig name (read without decoding where it leads the bytes), hashed by its bytes, and
// turned into its rule-file form only when it has changed. A resource unchanged since the rules in force
// travels to the compile process as its name and hash alone (withoutUnchangedBytes).
import { hashOf, type FileState, type JobEntry } from "../rules/compile-job.js";
import type { RuleError } from "../rules/model.js";
import { configObject, leadingName, ResourceError } from "./rate-limit-config.js";

export interface Resource {
  type_url?: string;
  value?: Uint8Array;
  /** Set instead of value: the resource is unchanged since the rules in force (its name and hash). */
  kept?: { name: string; hash: string };
}

/** Starts the message of a compile that needed a kept resource's bytes (RuleCompiler then sends them all). */
export const NEEDS_BYTES = "needs the bytes of unchanged resource";

function resourceHash(r: Resource): string {
  return hashOf(`${r.type_url ?? ""}\0`) + hashOf(r.value ?? new Uint8Array());
}

/**
 * The resources with the bytes of each one unchanged against `prev` (the files in force) left out: a reload
 * sends the compile process what changed, not the whole response (4 MiB take the event loop about 15 ms to
 * send). A resource whose name does not lead its bytes travels whole.
 */
export function withoutUnchangedBytes(resources: Resource[], prev: ReadonlyMap<string, FileState>): Resource[] {
  if (prev.size === 0) return resources;
  return resources.map((r) => {
    const name = leadingName(r.value);
    const was = name ? prev.get(name) : undefined;
    if (!name || !was) return r;
    const hash = resourceHash(r);
    return was.hash === hash ? { type_url: r.type_url, kept: { name, hash } } : r;
  });
}

export function resourceEntries(resources: Resource[]): JobEntry[] {
  return resources.map((r, i) => {
    if (r.kept) {
      const { name, hash } = r.kept;
      // Asked for only when a changed resource joins this one's domain (merged or a duplicate): the compile
      // fails with NEEDS_BYTES and runs again with every resource whole.
      return {
        name,
        hash,
        text: () => {
          throw new Error(`${NEEDS_BYTES} ${name}`);
        },
      } satisfies JobEntry;
    }
    const decode = (): { name: string; text: object } | RuleError => {
      try {
        const { name, doc } = configObject(r, i);
        return { name, text: doc };
      } catch (err) {
        if (!(err instanceof ResourceError)) throw err;
        return { file: err.resource, line: 0, path: "", message: err.problem };
      }
    };
    let name = leadingName(r.value);
    let decoded: { name: string; text: object } | RuleError | undefined;
    if (name === undefined || name === "") {
      decoded = decode();
      name = "message" in decoded ? decoded.file : decoded.name;
    }
    return { name, hash: resourceHash(r), text: () => decoded ?? decode() } satisfies JobEntry;
  });
}
