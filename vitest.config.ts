import { defineConfig } from "vitest/config";

/** Files whose assertions include a latency at production size: run alone, after the rest, so that the two
 * cores a CI host has are not also running other files' servers while they measure. */
const MEASURED_ALONE = ["test/integration/rule-scale.test.ts"];

const common = {
  // Kills what a test started and left running: after a failed test, at the end of a file, at exit.
  setupFiles: ["test/helpers/children-setup.ts"],
  testTimeout: 60_000,
  hookTimeout: 60_000,
  pool: "forks" as const,
};

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          ...common,
          name: "suite",
          // Each algorithm keeps its parity test in its folder (src/counters/<name>/).
          include: ["test/**/*.test.ts", "src/**/*.test.ts"],
          exclude: ["**/node_modules/**", ...MEASURED_ALONE],
          fileParallelism: true,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...common,
          name: "alone",
          include: MEASURED_ALONE,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
