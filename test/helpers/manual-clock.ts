// A clock that only moves when a test tells it to.
import type { Clock } from "../../src/store/clock.js";

export class ManualClock implements Clock {
  constructor(private micros = 1_700_000_000_000_000) {}
  nowMicros(): number {
    return this.micros;
  }
  set(micros: number): void {
    this.micros = micros;
  }
  advance(ms: number): void {
    this.micros += Math.round(ms * 1000);
  }
}
