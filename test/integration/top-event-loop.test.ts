// /top's work is bounded: on the memory store (whose summaries are merged on sluice's own event loop), with
// 1,000 rules refusing, 100 /top requests (each a different question, so none is answered from a kept answer;
// spread over 4 s, so the rules' distinct counts, kept a second, are read afresh about eight times) hold
// sluice's event loop for at most 5 ms at a time. Measured inside the sluice process
// (test/fixtures/event-loop-probe.mjs), read before and after the requests: the main thread's CPU time per turn
// of its loop. Where that clock is coarse (a VM's kernel counting CPU time at its 250 Hz scheduler tick advances it
// in steps of up to 4 ms) the bound is 5 ms plus one tick, 9 ms; on a precise clock, 5 ms. (Without steps, /top
// held the loop 20-21 ms of CPU at a time here.) Node's event-loop-delay histogram is printed beside it but not
// asserted: on a shared 2-core host it counts the time the process waits for a core (an idle sluice shows
// 30-170 ms there; its CPU figure, 0.2-1.5 ms).
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { ROOT, ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep, until } from "../helpers/wait.js";

const RULES = 1000;
const PROBE = path.join(ROOT, "test/fixtures/event-loop-probe.mjs");
/** The bound of the issue: at most this much event loop per step of a /top. */
const HOLD_MS = 5;
/** A coarse CPU clock's step (a 250 Hz tick); a clock that moved by more than COARSE_MS at once is coarse. */
const TICK_MS = 4;
const COARSE_MS = 0.5;

function rules(): string {
  let text = "domain: t\ndescriptors:\n";
  for (let i = 0; i < RULES; i++) text += `  - key: r${i}\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n`;
  return text;
}

describe("/top with 1,000 refusing rules on the memory store", () => {
  let s: SluiceProcess;
  let client: RlsClient;

  beforeAll(async () => {
    s = await startSluice(["--config", ruleDir({ "t.yaml": rules() })], { NODE_OPTIONS: `--import=${PROBE}` });
    client = rlsClient(s.port);
  }, 30_000);
  afterAll(async () => {
    client?.close();
    await s?.stop();
  });

  /** The probe's figures since its last reading. */
  async function eventLoop(): Promise<{ cpuMaxMs: number; cpuStepMs: number; wallMaxMs: number; gcMaxMs: number; ticks: number }> {
    const seen = s.logs.length;
    s.proc.kill("SIGUSR2");
    let line: string | undefined;
    await until(
      () => (line = s.logs.slice(seen).find((l) => l.includes('"eventLoop"'))) !== undefined,
      5000,
      () => "no reading from the probe",
    );
    return JSON.parse(
      line!
        .trim()
        .split("\n")
        .find((l) => l.includes('"eventLoop"'))!,
    ).eventLoop;
  }

  it("holds the event loop at most 5 ms at a time over 100 /top requests", async () => {
    // Every rule refuses three clients (2 hits against a limit of 1).
    for (let k = 0; k < 3; k++) {
      for (let from = 0; from < RULES; from += 250) {
        await Promise.all(
          Array.from({ length: 250 }, (_, j) =>
            client.shouldRateLimit({ domain: "t", descriptors: [{ entries: [{ key: `r${from + j}`, value: `c${k}` }], hits_addend: { value: 2 } }] }),
          ),
        );
      }
    }
    // Summaries reach the store within a second: wait until /top shows its 100 rules with 3 refusals each.
    await until(
      async () => {
        const top = (await (await fetch(`http://127.0.0.1:${s.adminPort}/top?n=0&window=1h`)).json()) as { rules: { refused: number }[] };
        return top.rules.length === 100 && top.rules.every((r) => r.refused === 3);
      },
      15_000,
      () => "the refusals did not reach /top",
    );

    await eventLoop(); // from here on: /top alone (no refusal, so no summary is written)
    const started = performance.now();
    for (let i = 0; i < 100; i++) {
      // n from 1 to 100: each question differs, so each is read from the store, none kept from before.
      const res = await fetch(`http://127.0.0.1:${s.adminPort}/top?n=${1 + i}&window=${i % 2 ? "1h" : "1m"}`);
      const top = (await res.json()) as { rules: { top: unknown[] }[] };
      expect([res.status, top.rules.length, top.rules[0].top.length]).toEqual([200, 100, Math.min(3, 1 + i)]);
      await sleep(40); // paced: what is measured is /top's work over several seconds of summaries
    }
    const seconds = (performance.now() - started) / 1000;
    const during = await eventLoop();
    console.log(
      `100 /top requests in ${seconds.toFixed(2)} s; longest turn of the event loop ${during.cpuMaxMs} ms of CPU, clock step ${during.cpuStepMs} ms ` +
        `(wall clock, host noise included: ${during.wallMaxMs} ms; longest GC pause ${during.gcMaxMs} ms; ${during.ticks} ticks)`,
    );
    expect(during.ticks).toBeGreaterThan(100);
    expect(during.cpuMaxMs).toBeLessThanOrEqual(HOLD_MS + (during.cpuStepMs > COARSE_MS ? TICK_MS : 0));
  }, 120_000);
});
