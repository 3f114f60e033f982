// The circuit breaker counts failures in a row as independent evidence: calls that were in flight
// together when a stall hit count once, sequential failures each count.
import { afterEach, describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/store/breaker.js";
import { sleep } from "../helpers/wait.js";

const breakers: CircuitBreaker[] = [];
afterEach(() => {
  for (const b of breakers.splice(0)) b.stop();
});

function breaker(): { b: CircuitBreaker; changes: string[] } {
  const changes: string[] = [];
  const b = new CircuitBreaker({ threshold: 3, probeIntervalMs: 60_000, probe: () => new Promise(() => {}), onChange: (s) => changes.push(s) });
  breakers.push(b);
  return { b, changes };
}

describe("CircuitBreaker", () => {
  it("64 calls in flight together that all fail count as one failure", () => {
    const { b, changes } = breaker();
    const started = performance.now();
    for (let i = 0; i < 64; i++) b.failure("timed out after 10 ms", started);
    expect(b.isOpen).toBe(false);
    expect(changes).toEqual([]);
  });

  it("opens on the third failure of calls started one after another, and a success in between starts over", () => {
    const { b, changes } = breaker();
    b.failure("timed out", performance.now());
    b.failure("timed out", performance.now());
    b.success();
    b.failure("timed out", performance.now());
    expect(b.isOpen).toBe(false);
    b.failure("timed out", performance.now());
    b.failure("timed out", performance.now());
    expect(b.isOpen).toBe(true);
    expect(changes).toEqual(["open"]);
  });

  it("a silent node's further timeouts count one each (no call was sent to fail them)", () => {
    const { b, changes } = breaker();
    const started = performance.now();
    b.failure("timed out", started);
    b.stillSilent("no reply for 100 ms");
    expect(b.isOpen).toBe(false);
    b.stillSilent("no reply for 150 ms");
    expect(b.isOpen).toBe(true);
    expect(changes).toEqual(["open"]);
  });

  it("a call started before the last counted failure does not count again", () => {
    const { b } = breaker();
    const early = performance.now();
    b.failure("timed out", performance.now());
    b.failure("timed out", early);
    b.failure("timed out", early);
    b.failure("timed out", performance.now());
    expect(b.isOpen).toBe(false);
    b.failure("timed out", performance.now());
    expect(b.isOpen).toBe(true);
  });

  it("probeNow probes an open circuit at once (a topology change), not at the next interval", async () => {
    const changes: string[] = [];
    let probes = 0;
    const b = new CircuitBreaker({
      threshold: 1,
      probeIntervalMs: 60_000,
      probe: async () => {
        probes++;
      },
      onChange: (s) => changes.push(s),
    });
    breakers.push(b);
    b.probeNow(); // closed: nothing to probe
    b.failure("connection closed", performance.now());
    expect(b.isOpen).toBe(true);
    b.probeNow();
    await sleep(20);
    expect(probes).toBe(1);
    expect(b.isOpen).toBe(false);
    expect(changes).toEqual(["open", "closed"]);
  });
});
