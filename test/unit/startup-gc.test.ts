// The full collection before serving (src/cli/startup-gc.ts) runs, without --expose-gc on the command line:
// garbage the test leaves in the old generation is gone after it.
import v8 from "node:v8";
import { expect, it } from "vitest";
import { collectBeforeServing } from "../../src/cli/startup-gc.js";

it("collects the old generation's garbage at once, with no node flag", () => {
  expect(typeof (globalThis as { gc?: unknown }).gc).toBe("undefined");
  let garbage: number[][] | undefined = Array.from({ length: 400 }, () => Array.from({ length: 20_000 }, (_, i) => i + 0.5));
  const withGarbage = v8.getHeapStatistics().used_heap_size;
  garbage = undefined;
  expect(garbage).toBeUndefined();
  expect(collectBeforeServing()).toBeGreaterThanOrEqual(0);
  // 400 arrays of 20,000 doubles: about 64 MB, all of it unreachable now.
  expect(withGarbage - v8.getHeapStatistics().used_heap_size).toBeGreaterThan(50 * 2 ** 20);
});
