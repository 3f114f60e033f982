// Validates Kubernetes objects against the API's schemas, offline: kubernetes-models' validators (compiled from
// the Kubernetes OpenAPI spec; @kubernetes-models/prometheus-operator's from the operator's CRDs) check types,
// required fields, enums and formats. They accept fields the schema does not name, which the API server refuses
// (strict field validation) or silently drops (CRDs): a misspelt `readinessProbe` or `paht` would pass. So the
// object is validated through a proxy that records every field the validator reads; a field it never read is
// one the schema does not have.

interface ModelClass {
  prototype: { validate(this: unknown): void };
}

/** Where the models of an API group live: Kubernetes' own groups in kubernetes-models, CRDs in their package. */
function modulePath(apiVersion: string, kind: string): string {
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  if (group === "monitoring.coreos.com") return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  return `kubernetes-models/${apiVersion}/${kind}`;
}

async function modelClass(apiVersion: string, kind: string): Promise<ModelClass> {
  let mod: Record<string, ModelClass>;
  try {
    mod = await import(modulePath(apiVersion, kind));
  } catch {
    throw new Error(`no schema for ${apiVersion} ${kind}`);
  }
  if (!mod[kind]) throw new Error(`no schema for ${apiVersion} ${kind}`);
  return mod[kind];
}

/** A view of `value` that adds to `read` the path of each field read through it. */
function recording(value: unknown, path: string, read: Set<string>): unknown {
  if (value === null || typeof value !== "object") return value;
  return new Proxy(value as object, {
    get(target, key, receiver) {
      const child = Reflect.get(target, key, receiver);
      if (typeof key !== "string" || !Object.hasOwn(target, key)) return child;
      const childPath = `${path}/${key}`;
      read.add(childPath);
      return recording(child, childPath, read);
    },
  });
}

/** Paths of every field in `value` (array items are not fields: their indexes are part of the path). */
function fieldPaths(value: unknown, path: string, out: string[] = []): string[] {
  if (value === null || typeof value !== "object") return out;
  for (const [key, child] of Object.entries(value)) {
    const childPath = `${path}/${key}`;
    if (!Array.isArray(value)) out.push(childPath);
    fieldPaths(child, childPath, out);
  }
  return out;
}

/** Problems of one object against its kind's schema; [] when it is valid. */
export async function schemaProblems(doc: { apiVersion?: unknown; kind?: unknown; [field: string]: unknown }): Promise<string[]> {
  if (typeof doc.apiVersion !== "string" || typeof doc.kind !== "string") return ["apiVersion and kind are required"];
  const model = await modelClass(doc.apiVersion, doc.kind);
  const read = new Set<string>();
  try {
    model.prototype.validate.call(recording(doc, "", read));
  } catch (err) {
    return [(err as Error).message];
  }
  return fieldPaths(doc, "")
    .filter((p) => !read.has(p))
    .map((p) => `data${p} is not a field of ${doc.apiVersion} ${doc.kind}`);
}
