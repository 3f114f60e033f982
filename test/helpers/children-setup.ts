// vitest setup file (vitest.config.ts): runs in every test file's worker. Its hooks are registered first,
// so with the default "stack" order its afterEach/afterAll run after the file's own (which stop their
// processes gracefully): what they left behind, a failed test's or a failed hook's, is killed here.
import { afterAll, afterEach, beforeEach } from "vitest";
import { killAllNow, killTracked, setCurrentTest } from "./children.js";

beforeEach((ctx) => setCurrentTest(ctx.task.id));

afterEach(async (ctx) => {
  const id = ctx.task.id;
  setCurrentTest(undefined);
  if (ctx.task.result?.state === "fail") await killTracked((testId) => testId === id);
});

afterAll(async () => {
  await killTracked();
});

process.once("exit", killAllNow);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    killAllNow();
    process.kill(process.pid, signal); // this listener is gone: the default action (exit) follows
  });
}
