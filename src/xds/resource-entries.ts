// The resources of one xDS response as compile entries (rules/compile-job.ts): each named by its
// RateLimitConfig name (read without decoding where it leads the bytes), hashed by its bytes, and
// turned into its rule-file form only when it has changed.
import { hashOf, type JobEntry } from "../rules/compile-job.js";
import type { RuleError } from "../rules/model.js";
import { configObject, leadingName, ResourceError } from "./rate-limit-config.js";

export interface Resource {
  type_url?: string;
  value?: Uint8Array;
}

export function resourceEntries(resources: Resource[]): JobEntry[] {
  return resources.map((r, i) => {
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
    const hash = hashOf(`${r.type_url ?? ""}\0`) + hashOf(r.value ?? new Uint8Array());
    return { name, hash, text: () => decoded ?? decode() } satisfies JobEntry;
  });
}
