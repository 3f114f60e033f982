import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Each algorithm keeps its parity test in its folder (src/counters/<name>/).
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    // Kills what a test started and left running: after a failed test, at the end of a file, at exit.
    setupFiles: ["test/helpers/children-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    fileParallelism: true,
    maxWorkers: 2,
  },
});
