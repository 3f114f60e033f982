// Descriptor paths: the only place that builds them. `domain.k1_v1.k2`: per descriptor entry a dot and
// its key, then `_` and its value when it has one (the reference's composite key, config_impl.go). A
// rule's path is its id (Limit.path) and the reference's stats key, so rule errors, `explain`, rules
// JSON, metrics and statsd names all print the same one. Values are not escaped: a path is a name, not
// a store key (keys.ts builds those).

/** A request descriptor's entry (limiter/types.ts DescriptorEntry). */
interface Entry {
  key: string;
  value: string;
}

/** `parent.key_value`; the `_` is written even for an empty value (the reference's detailed_metric key). */
export function descriptorPathWithValue(parent: string, key: string, value: string): string {
  return `${parent}.${key}_${value}`;
}

/** `parent.key_value`, or `parent.key` when value is empty. */
export function descriptorPath(parent: string, key: string, value: string): string {
  return value === "" ? `${parent}.${key}` : descriptorPathWithValue(parent, key, value);
}

/** A request's own path, `domain.k1_v1.k2`, from its entries rather than from matched rules. */
export function entriesPath(domain: string, entries: readonly Entry[]): string {
  let path = domain;
  for (const e of entries) path = descriptorPath(path, e.key, e.value);
  return path;
}

/** `domain.k1.k2`: keys only, for names that end up in logs, where request values never go. */
export function keysOnlyPath(domain: string, entries: readonly Entry[]): string {
  let path = domain;
  for (const e of entries) path = descriptorPath(path, e.key, "");
  return path;
}
