// A store call's deadline: fires for a call that does not answer, and not for a reply that already
// waits in the socket while this process was busy past the deadline.
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_WAIT_FLOOR_MS, ReplyWatch, StoreTimeoutError, withDeadline } from "../../src/store/deadline.js";
import { track } from "../helpers/children.js";
import { sleep } from "../helpers/wait.js";

// A store that answers every chunk at once, in its own process so it answers while this one is busy.
const ECHO = `const s = require("net").createServer((c) => { c.on("error", () => {}); c.on("data", (d) => c.write(d)); });
s.listen(0, "127.0.0.1", () => console.log(s.address().port));`;
let echo: ChildProcess;
let port: number;
beforeAll(async () => {
  echo = track(spawn(process.execPath, ["-e", ECHO], { stdio: ["ignore", "pipe", "inherit"] }));
  port = await new Promise<number>((resolve) => echo.stdout!.once("data", (d) => resolve(Number(String(d).trim()))));
});
afterAll(() => {
  echo.kill();
});

function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    /* the event loop is blocked, as under load */
  }
}

describe("withDeadline", () => {
  it("rejects a call that never answers with StoreTimeoutError after the time limit", async () => {
    const started = performance.now();
    const err = (await withDeadline(new Promise(() => {}), 20).catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(StoreTimeoutError);
    expect(err.message).toBe("timed out after 20 ms");
    expect(performance.now() - started).toBeGreaterThanOrEqual(19);
  });

  it("passes a value and an error through unchanged", async () => {
    expect(await withDeadline(Promise.resolve(7), 20)).toBe(7);
    const boom = new Error("boom");
    await expect(withDeadline(Promise.reject(boom), 20)).rejects.toBe(boom);
  });

  it("a reply that arrived while the loop was busy past the deadline is taken, not timed out", async () => {
    const socket = net.connect(port, "127.0.0.1");
    await new Promise((r) => socket.once("connect", r));
    try {
      const reply = new Promise<string>((resolve) => socket.once("data", (d) => resolve(d.toString())));
      socket.write("ping");
      const answered = withDeadline(reply, 10);
      busy(100); // the echo is back in the socket long before this ends; the 10 ms timer is due too
      expect(await answered).toBe("ping");
    } finally {
      socket.destroy();
    }
  });
});

describe("ReplyWatch (the deadline of one connection's script calls)", () => {
  const never = () => new Promise<never>(() => {});

  it("fails a call the node never answers, timeoutMs after it left", async () => {
    const watch = new ReplyWatch(20);
    const started = performance.now();
    const err = await watch.watch(never(), true).catch((e) => e);
    expect(err).toBeInstanceOf(StoreTimeoutError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(19);
    expect(watch.inFlight).toBe(0);
  });

  it("a call waiting in a write batch has no deadline until the batch leaves", async () => {
    const watch = new ReplyWatch(20);
    let failed = false;
    const call = watch.watch(never(), false).catch((e) => {
      failed = true;
      return e;
    });
    busy(60);
    await sleep(30);
    expect(failed).toBe(false);
    expect(watch.inFlight).toBe(1);
    const sentAt = performance.now();
    watch.sent();
    expect(await call).toBeInstanceOf(StoreTimeoutError);
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(19);
  });

  it("replies that waited in the socket while this process was busy count as the node's progress", async () => {
    const socket = net.connect(port, "127.0.0.1");
    await new Promise((r) => socket.once("connect", r));
    try {
      const watch = new ReplyWatch(10);
      // The echo answers each write; the reply to the second arrives behind the first.
      const replies: ((s: string) => void)[] = [];
      socket.on("data", (d) => {
        for (const ch of d.toString()) replies.shift()?.(ch);
      });
      const one = watch.watch(new Promise<string>((r) => replies.push(r)), true);
      const two = watch.watch(new Promise<string>((r) => replies.push(r)), true);
      socket.write("a");
      socket.write("b");
      busy(100); // both timers are long due when the loop runs again
      expect(await Promise.all([one, two])).toEqual(["a", "b"]);
    } finally {
      socket.destroy();
    }
  });

  it("a call timed out with nothing heard since it left makes the node silent, until its next reply", async () => {
    let silences = 0;
    const watch = new ReplyWatch(10, () => silences++);
    expect(watch.silent).toBe(false);
    expect(await watch.watch(never(), true).catch((e) => e)).toBeInstanceOf(StoreTimeoutError);
    expect(watch.silent).toBe(true);
    // A second call waiting through the same silence does not start another.
    expect(await watch.watch(never(), true).catch((e) => e)).toBeInstanceOf(StoreTimeoutError);
    expect(silences).toBe(1);
    expect(await watch.watch(Promise.resolve("late"), true)).toBe("late");
    expect(watch.silent).toBe(false);
    expect(watch.silentSince).toBeUndefined();
  });

  it("the calls waiting behind a call that timed out on a silent node fail with it, not a timeout later each", async () => {
    const watch = new ReplyWatch(40);
    const started = performance.now();
    const first = watch.watch(never(), true).catch((e) => e);
    await sleep(20);
    const second = watch.watch(never(), true).catch((e) => e);
    const batched = watch.watch(never(), false).catch((e) => e); // still in a write batch
    const firstErr = await first;
    const failedAt = performance.now() - started;
    expect(firstErr).toBeInstanceOf(StoreTimeoutError);
    // Settled in the same check as the first (their own deadlines were 20 ms and a whole timeout later).
    expect(await Promise.race([second, sleep(5).then(() => "still waiting")])).toBeInstanceOf(StoreTimeoutError);
    expect(await batched).toBeInstanceOf(StoreTimeoutError);
    expect(failedAt).toBeGreaterThanOrEqual(39);
    expect(watch.inFlight).toBe(0);
    expect(watch.silent).toBe(true);
  });

  it("a call that timed out after the node was heard from does not fail the calls behind it", async () => {
    const watch = new ReplyWatch(30);
    const first = watch.watch(never(), true).catch((e) => e);
    await sleep(10);
    expect(await watch.watch(Promise.resolve("heard"), true)).toBe("heard"); // the node's progress
    await sleep(5);
    const thirdSentAt = performance.now();
    const third = watch.watch(never(), true).catch((e) => e);
    expect(await first).toBeInstanceOf(StoreTimeoutError);
    expect(watch.silent).toBe(false);
    // The third waits out its own deadline.
    expect(await third).toBeInstanceOf(StoreTimeoutError);
    expect(performance.now() - thirdSentAt).toBeGreaterThanOrEqual(29);
  });

  it("a node that keeps answering others keeps a call alive, up to the maximum wait", async () => {
    const watch = new ReplyWatch(20);
    const started = performance.now();
    const stuck = watch.watch(never(), true).catch((e) => e);
    // Other calls on the connection answer every 5 ms: the node is not silent.
    const ticker = setInterval(() => void watch.watch(Promise.resolve(1), true), 5);
    try {
      const err = await stuck;
      expect(err).toBeInstanceOf(StoreTimeoutError);
      expect(performance.now() - started).toBeGreaterThanOrEqual(MAX_WAIT_FLOOR_MS - 1);
    } finally {
      clearInterval(ticker);
    }
  });
});
