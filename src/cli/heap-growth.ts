// V8's heap growth before a full collection (SLUICE_HEAP_GROWING_PERCENT). Left to itself V8 lets the old
// generation grow to several times what is live; until that collection the garbage holds RSS: the native side of
// finished calls' HTTP/2 streams under load, replaced rules after reloads. A factor of 2 keeps about 40 % off the
// peak under load for a few percent of CPU (docs/benchmarks.md "The process"). V8 refuses the flag in NODE_OPTIONS,
// so it is set here, before the rules load; V8 reads it each time it sets the next collection's limit.
import v8 from "node:v8";

/** Sets the growth factor to 1 + percent / 100; 0 leaves V8's own (or a node command line's). */
export function setHeapGrowth(percent: number): void {
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
