// Time source of the memory store, in microseconds since the epoch (Redis TIME's resolution).

export interface Clock {
  nowMicros(): number;
}

export const systemClock: Clock = {
  // timeOrigin + now() gives sub-millisecond wall time; Date.now() alone is ms only.
  nowMicros: () => Math.floor((performance.timeOrigin + performance.now()) * 1000),
};

/** A clock that only moves when told to (tests). */
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
