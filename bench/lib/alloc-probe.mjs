// Loaded into a sluice process by bench/h2-alloc.mjs (node --import): on SIGUSR2 it appends to the file
// named by SLUICE_BENCH_ALLOC_FILE one JSON line: the bytes the V8 heap allocated since the last signal
// (the heap's growth between GCs, summed over every GC in between), and how many GCs ran.
import fs from "node:fs";
import v8 from "node:v8";

const file = process.env.SLUICE_BENCH_ALLOC_FILE;
if (!file) throw new Error("alloc-probe.mjs: set SLUICE_BENCH_ALLOC_FILE");
let profiler = new v8.GCProfiler();
profiler.start();
let from = v8.getHeapStatistics().used_heap_size;

process.on("SIGUSR2", () => {
  const { statistics } = profiler.stop();
  const now = v8.getHeapStatistics().used_heap_size;
  let allocated = 0;
  let last = from;
  for (const gc of statistics) {
    allocated += gc.beforeGC.heapStatistics.usedHeapSize - last;
    last = gc.afterGC.heapStatistics.usedHeapSize;
  }
  allocated += now - last;
  const scavenges = statistics.filter((gc) => gc.gcType === "Scavenge").length;
  fs.appendFileSync(file, `${JSON.stringify({ allocated, gcs: statistics.length, scavenges })}\n`);
  profiler = new v8.GCProfiler();
  profiler.start();
  from = v8.getHeapStatistics().used_heap_size;
});
