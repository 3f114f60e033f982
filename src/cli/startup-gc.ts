// One full collection once the first rules are in, before sluice listens. The first load leaves its parse in
// the old generation as garbage (tens of MB at 100,000 descriptors); left to V8, the first full collection while
// serving clears it, and that pause was 66 to 71 ms (Mark-Compact, --trace-gc), past Envoy's 20 ms: the calls it
// held waited as long. Done here, the start pays it instead. V8 offers the call only behind --expose-gc, which a
// new context picks up when set at run time (the way heap-growth.ts sets its flag).
import v8 from "node:v8";
import vm from "node:vm";

/** Runs a full collection now; its duration in ms. */
export function collectBeforeServing(): number {
  v8.setFlagsFromString("--expose-gc");
  const gc = vm.runInNewContext("gc") as () => void;
  const started = performance.now();
  gc();
  return performance.now() - started;
}
