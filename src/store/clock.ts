// Time source of the memory store, in microseconds since the epoch (Redis TIME's resolution).

export interface Clock {
  nowMicros(): number;
}

export const systemClock: Clock = {
  // timeOrigin + now() gives sub-millisecond wall time; Date.now() alone is ms only.
  nowMicros: () => Math.floor((performance.timeOrigin + performance.now()) * 1000),
};
