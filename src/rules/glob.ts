// Glob matcher for rule values: `*` matches any run of characters (also empty), nothing else is special.
// Built from literal segments checked with startsWith/endsWith/indexOf: linear-ish, no regex backtracking.

export function compileGlob(pattern: string): (value: string) => boolean {
  const parts = pattern.split("*");
  if (parts.length === 1) return (value) => value === pattern;
  const prefix = parts[0];
  const suffix = parts[parts.length - 1];
  // Empty middle segments (from `**`) match anything, so drop them.
  const middle = parts.slice(1, -1).filter((p) => p !== "");
  const fixed = prefix.length + suffix.length;
  return (value) => {
    if (value.length < fixed || !value.startsWith(prefix) || !value.endsWith(suffix)) return false;
    // Leftmost placement of each middle segment is always safe: it leaves the most room for the rest.
    let at = prefix.length;
    const end = value.length - suffix.length;
    for (const seg of middle) {
      const i = value.indexOf(seg, at);
      if (i < 0 || i + seg.length > end) return false;
      at = i + seg.length;
    }
    return true;
  };
}
